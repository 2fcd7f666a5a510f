"""Corpus loading: directories and files, every bad file named, skipped only on request."""

from pathlib import Path

import numpy as np
import pytest

from phylorl.env.corpus import CorpusError, load_corpus
from phylorl.phylo import format_fasta, format_phylip
from phylorl.phylo.simulate import simulate_dataset

NEXUS = """#NEXUS
begin data;
  dimensions ntax=4 nchar=6;
  format datatype=dna missing=? gap=-;
  matrix
    w ACGTAC
    x ACGTAA
    y ACG-AC
    z TCGTAC
  ;
end;
"""


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    """a.fasta (5 taxa), b.phy (6 taxa), c.nex (4 taxa), plus files the loader must ignore."""
    (tmp_path / "a.fasta").write_text(
        format_fasta(simulate_dataset(5, 40, np.random.default_rng(1)).alignment)
    )
    (tmp_path / "b.phy").write_text(
        format_phylip(simulate_dataset(6, 30, np.random.default_rng(2)).alignment)
    )
    (tmp_path / "c.nex").write_text(NEXUS)
    (tmp_path / "a.true.nwk").write_text("(t1,t2,(t3,t4));\n")
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.fasta").write_text(">x\nAC\n")  # not recursed into
    return tmp_path


def test_directory_loads_alignment_files_in_name_order(corpus_dir):
    corpus = load_corpus(corpus_dir)
    assert [entry.path.name for entry in corpus] == ["a.fasta", "b.phy", "c.nex"]
    assert [entry.alignment.n_taxa for entry in corpus] == [5, 6, 4]
    assert [entry.alignment.n_sites for entry in corpus] == [40, 30, 6]
    assert len(corpus) == 3 and corpus[2].alignment.taxa == ("w", "x", "y", "z")
    assert corpus.skipped == []


def test_list_of_files_and_directories_keeps_order_without_duplicates(corpus_dir):
    corpus = load_corpus([str(corpus_dir / "c.nex"), corpus_dir, corpus_dir / "a.fasta"])
    assert [entry.path.name for entry in corpus] == ["c.nex", "a.fasta", "b.phy"]


def test_bad_files_are_all_named_and_fail_by_default(corpus_dir):
    (corpus_dir / "bad.fasta").write_text(">t1\nACGT\n>t2\nACG\n>t3\nACGT\n>t4\nACGT\n")
    (corpus_dir / "empty.phy").write_text("")
    with pytest.raises(CorpusError) as info:
        load_corpus(corpus_dir)
    lines = str(info.value).splitlines()
    assert lines[0].startswith("2 of 5 corpus file(s) cannot be read")
    assert (
        lines[1].strip().startswith(str(corpus_dir / "bad.fasta")) and "has 3 sites, expected 4" in lines[1]
    )
    assert lines[2].strip() == f"{corpus_dir / 'empty.phy'}: empty file"


def test_bad_files_are_skipped_and_reported_on_request(corpus_dir):
    (corpus_dir / "bad.fasta").write_text("not an alignment\n")
    corpus = load_corpus(corpus_dir, skip_unreadable=True)
    assert [entry.path.name for entry in corpus] == ["a.fasta", "b.phy", "c.nex"]
    assert [(path.name, message) for path, message in corpus.skipped] == [
        ("bad.fasta", f"{corpus_dir / 'bad.fasta'}: line 1: sequence data before the first '>' header")
    ]


def test_min_taxa(corpus_dir):
    with pytest.raises(CorpusError, match="c.nex: only 4 taxa"):
        load_corpus(corpus_dir, min_taxa=5)
    assert [e.path.name for e in load_corpus(corpus_dir, min_taxa=5, skip_unreadable=True)] == [
        "a.fasta",
        "b.phy",
    ]


def test_empty_and_missing_corpora(tmp_path):
    with pytest.raises(CorpusError, match="holds no alignment"):
        load_corpus(tmp_path)
    (tmp_path / "x.fasta").write_text("garbage")
    with pytest.raises(CorpusError, match="all 1 file\\(s\\) were unreadable"):
        load_corpus(tmp_path, skip_unreadable=True)
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nowhere")
    with pytest.raises(CorpusError, match="holds no alignment"):
        load_corpus([])


def test_sample_is_uniform_and_seeded(corpus_dir):
    corpus = load_corpus(corpus_dir)
    rng = np.random.default_rng(0)
    names = [corpus.sample(rng).path.name for _ in range(3000)]
    counts = [names.count(name) for name in ("a.fasta", "b.phy", "c.nex")]
    assert all(900 < count < 1100 for count in counts)
    again = np.random.default_rng(0)
    assert [corpus.sample(again).path.name for _ in range(20)] == names[:20]
