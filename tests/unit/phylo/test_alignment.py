"""Alignment reading, site patterns and empirical frequencies (oracle: IQ-TREE 2, binary ``iqtree2``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from phylorl.phylo.alignment import (
    STATE_MASKS,
    Alignment,
    AlignmentError,
    format_fasta,
    format_phylip,
    load_alignment,
    parse_alignment,
)

DS1 = Path("/work/shared/data/ds/DS1.fasta")
if not DS1.exists():  # the same file, relative to the repository
    DS1 = Path(__file__).resolve().parents[4] / "shared/data/ds/DS1.fasta"

# One small alignment written in every supported layout. Sites: 10; ambiguity, gap and missing data.
TAXA = ("Homo_sapiens", "Pan", "Gorilla_g", "Pongo")
SEQS = ("ACGTACCGGT", "ACG-ACCGGT", "ACGR--NGGT", "TTTTTTTYTT")

FASTA = "".join(f">{name} some description\n{seq[:6]}\n{seq[6:]}\n" for name, seq in zip(TAXA, SEQS))
PHYLIP_SEQUENTIAL = """4 10
Homo_sapiens ACGTA CCGGT
Pan          ACG-A
             CCGGT
Gorilla_g    acgr--nggt
Pongo        TTTTTTTYTT
"""
PHYLIP_INTERLEAVED = """ 4 10
Homo_sapiens ACGTA
Pan          ACG-A
Gorilla_g    ACGR-
Pongo        TTTTT

CCGGT
CCGGT
-NGGT
TTYTT
"""
NEXUS_DATA = """#NEXUS
[written by hand [nested comment]]
BEGIN DATA;
  DIMENSIONS NTAX=4 NCHAR=10;
  FORMAT DATATYPE=DNA MISSING=? GAP=-;
  MATRIX
    Homo_sapiens ACGTACCGGT [a comment inside the matrix]
    Pan          ACG-ACCGGT
    'Gorilla_g'  ACG{AG}--?GGT
    Pongo        TTTTT
                 TT(CT)TT
  ;
END;
"""
NEXUS_CHARACTERS_INTERLEAVED = """#nexus
begin taxa;
  dimensions ntax=4;
  taxlabels Homo_sapiens Pan Gorilla_g Pongo;
end;
begin characters;
  dimensions nchar=10;
  format datatype=nucleotide missing=N gap=~ matchchar=. interleave=yes;
  matrix
    Homo_sapiens ACGTA
    Pan          ...~.
    Gorilla_g    ...R~
    Pongo        TTTTT

    Homo_sapiens CCGGT
    Pan          .....
    Gorilla_g    ~N...
    Pongo        TTYTT
  ;
end;
"""


def expected_alignment() -> Alignment:
    codes = np.array([[STATE_MASKS[ch] for ch in seq] for seq in SEQS], dtype=np.uint8)
    return Alignment(taxa=TAXA, codes=codes)


def reason_for(text: str | bytes, tmp_path: Path, name: str, fmt: str | None = None) -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(AlignmentError) as err:
        load_alignment(path, fmt)
    message = str(err.value)
    assert str(path) in message
    return message


# ------------------------------------------------------------------------------------------- formats


def test_state_masks_follow_iupac():
    assert [STATE_MASKS[ch] for ch in "ACGTU"] == [1, 2, 4, 8, 8]
    assert STATE_MASKS["R"] == 1 | 4 and STATE_MASKS["Y"] == 2 | 8 and STATE_MASKS["B"] == 2 | 4 | 8
    assert {STATE_MASKS[ch] for ch in "NX?-.~"} == {15}


@pytest.mark.parametrize(
    "name, text",
    [
        ("aln.fasta", FASTA),
        ("aln.phy", PHYLIP_SEQUENTIAL),
        ("aln.phylip", PHYLIP_INTERLEAVED),
        ("aln.nex", NEXUS_DATA),
        ("aln.nexus", NEXUS_CHARACTERS_INTERLEAVED),
    ],
)
def test_every_format_reads_the_same_alignment(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    alignment = load_alignment(path)
    assert alignment == expected_alignment()
    assert alignment.taxa == TAXA  # underscores kept, FASTA description dropped
    assert alignment.source == str(path)
    assert alignment.codes.dtype == np.uint8 and alignment.codes.flags.c_contiguous


@pytest.mark.parametrize("text", [FASTA, PHYLIP_SEQUENTIAL, PHYLIP_INTERLEAVED, NEXUS_DATA])
def test_format_detected_from_content(tmp_path, text):
    path = tmp_path / "alignment.txt"
    path.write_text(text)
    assert load_alignment(path) == expected_alignment()
    assert parse_alignment(text) == expected_alignment()


def test_explicit_format_overrides_extension(tmp_path):
    path = tmp_path / "really_phylip.fa"
    path.write_text(PHYLIP_SEQUENTIAL)
    assert load_alignment(path, "phylip") == expected_alignment()


def test_windows_line_endings_and_byte_order_mark(tmp_path):
    path = tmp_path / "crlf.fasta"
    path.write_bytes(b"\xef\xbb\xbf" + FASTA.replace("\n", "\r\n").encode())
    assert load_alignment(path) == expected_alignment()


def test_strict_phylip_ten_character_names():
    text = "4 4\nHomo_sapieACGT\nPan_trogl AC-T\nGorilla   ACGA\nPongo_abelTTTT\n"
    alignment = parse_alignment(text)
    assert alignment.taxa == ("Homo_sapie", "Pan_trogl", "Gorilla", "Pongo_abel")
    assert format_fasta(alignment).split() == [
        ">Homo_sapie",
        "ACGT",
        ">Pan_trogl",
        "AC-T",
        ">Gorilla",
        "ACGA",
        ">Pongo_abel",
        "TTTT",
    ]


def test_fasta_and_phylip_writers_round_trip():
    alignment = expected_alignment()
    wrapped = format_fasta(alignment, width=4)
    assert wrapped.splitlines()[:4] == [">Homo_sapiens", "ACGT", "ACCG", "GT"]
    assert format_fasta(alignment).splitlines()[5] == "ACGR---GGT"  # mask 15 is written '-'
    assert format_phylip(alignment).splitlines()[:2] == ["4 10", "Homo_sapiens  ACGTACCGGT"]
    for text in (wrapped, format_fasta(alignment), format_phylip(alignment)):
        assert parse_alignment(text) == alignment


def test_alignment_is_immutable_and_validated():
    alignment = expected_alignment()
    with pytest.raises(ValueError):
        alignment.codes[0, 0] = 2
    with pytest.raises(AlignmentError, match="duplicate taxon name 'a'"):
        Alignment(taxa=("a", "b", "a"), codes=np.ones((3, 2), dtype=np.uint8))
    with pytest.raises(AlignmentError, match="1..15"):
        Alignment(taxa=("a", "b"), codes=np.zeros((2, 2), dtype=np.uint8))
    with pytest.raises(AlignmentError, match="codes must be"):
        Alignment(taxa=("a", "b"), codes=np.ones((3, 2), dtype=np.uint8))


def test_min_taxa_can_be_lowered_for_tiny_cases():
    assert parse_alignment(">a\nAC\n>b\nAT\n", min_taxa=2).n_taxa == 2


# -------------------------------------------------------------------------------------------- errors


FOUR = ">b\nACGT\n>c\nACGT\n>d\nACGT\n"


@pytest.mark.parametrize(
    "name, text, expected",
    [
        (
            "len.fa",
            ">a\nACGT\n>b\nACG\n>c\nACGT\n>d\nACGT\n",
            ["line 3", "taxon 'b' has 3 sites, expected 4"],
        ),
        ("dup.fa", ">a\nACGT\n" + FOUR + ">a\nACGA\n", ["line 9", "duplicate taxon name 'a'", "line 1"]),
        ("char.fa", ">a\nACJT\n" + FOUR, ["taxon 'a'", "unknown character 'J' at site 3"]),
        ("utf.fa", ">a\nACGé\n" + FOUR, ["taxon 'a'", "unknown character 'é' at site 4"]),
        ("few.fa", ">a\nACGT\n>b\nACGT\n>c\nACGT\n", ["only 3 taxa", "at least 4"]),
        ("empty.fa", "  \n\n", ["empty file"]),
        ("noname.fa", ">a\nACGT\n>  \nACGT\n" + FOUR, ["line 3", "has no name"]),
        ("orphan.fa", "ACGT\n>a\nACGT\n" + FOUR, ["line 1", "before the first '>'"]),
        ("zero.fa", ">a\n>b\n>c\n>d\n", ["0 sites"]),
        ("what.txt", "hello world\n", ["line 1", "cannot detect the format"]),
        ("ntax.phy", "5 4\na ACGT\nb ACGT\nc ACGT\nd ACGT\n", ["says 5 taxa", "only 4"]),
        (
            "extra.phy",
            "4 4\na ACGT\nb ACGT\nc ACGT\nd ACGT\ne ACGT\n",
            ["line 6", "more data than the declared 4 taxa"],
        ),
        (
            "nchar.phy",
            "4 5\na ACGT\nb ACGT\nc ACGT\nd ACGT\n",
            ["taxon 'a' has 4 sites, expected 5", "PHYLIP header"],
        ),
        (
            "short.phy",
            "4 8\na ACGTACGT\nb ACGT\nc ACGTACGT\nd ACGTACGT\n",
            ["line 3", "taxon 'b' has 4 sites"],
        ),
        ("header.phy", "4 x\na ACGT\n", ["line 1", "PHYLIP header must be 'ntax nchar'"]),
        ("nexus.nex", NEXUS_DATA.replace("NTAX=4", "NTAX=5"), ["5 taxa declared but 4 found"]),
        (
            "nexus2.nex",
            NEXUS_DATA.replace("NCHAR=10", "NCHAR=11"),
            ["line 7", "'Homo_sapiens' has 10 sites, expected 11"],
        ),
        (
            "nexus3.nex",
            NEXUS_DATA.replace("ACG-ACCGGT", "ACG-ACJGGT"),
            ["line 8", "taxon 'Pan'", "'J' at site 7"],
        ),
        ("nexus4.nex", NEXUS_DATA.replace("DATATYPE=DNA", "DATATYPE=PROTEIN"), ["DATATYPE=PROTEIN"]),
        ("nexus5.nex", NEXUS_DATA.replace("MATRIX", "MATRIS"), ["no MATRIX"]),
        ("nexus6.nex", NEXUS_DATA.replace("]]", "]"), ["unterminated [comment]"]),
        (
            "inter.nex",
            NEXUS_CHARACTERS_INTERLEAVED.replace("Pan          .....", "Pin          ....."),
            ["line 16", "'Pin' is not in the first MATRIX block"],
        ),
        (
            "match.nex",
            NEXUS_CHARACTERS_INTERLEAVED.replace("Homo_sapiens ACGTA", "Homo_sapiens AC.TA"),
            ["line 10", "first taxon 'Homo_sapiens' uses MATCHCHAR '.'"],
        ),
    ],
)
def test_bad_input_names_file_and_culprit(tmp_path, name, text, expected):
    message = reason_for(text, tmp_path, name)
    for part in expected:
        assert part in message, message


def test_binary_and_undecodable_files(tmp_path):
    assert "binary file" in reason_for(b">a\nAC\x00GT\n", tmp_path, "nul.fa")
    assert "not a text file" in reason_for(b">a\nAC\xff\xfeGT\n", tmp_path, "latin.fa")


def test_missing_file(tmp_path):
    with pytest.raises(AlignmentError, match="cannot read file"):
        load_alignment(tmp_path / "nope.fasta")


def test_string_source_is_named():
    with pytest.raises(AlignmentError, match="^<string>: "):
        parse_alignment(">a\nACGT\n")
    with pytest.raises(AlignmentError, match="^in-memory: binary"):
        parse_alignment(">a\nA\0\n", source="in-memory")


# ---------------------------------------------------------------------------------------- patterns


def test_patterns_are_distinct_columns_in_first_occurrence_order():
    # columns: 0:AAAA 1:CCCC 2:AAAA 3:A-NA (== A??A) 4:CCCC 5:A?-A
    alignment = parse_alignment(">a\nACAACA\n>b\nACA-C?\n>c\nACANC-\n>d\nACAACA\n")
    patterns = alignment.patterns()
    assert patterns.n_patterns == 3
    assert patterns.site_pattern.tolist() == [0, 1, 0, 2, 1, 2]
    assert patterns.weights.tolist() == [2.0, 2.0, 2.0]
    assert patterns.codes.tolist() == [[1, 2, 1], [1, 2, 15], [1, 2, 15], [1, 2, 1]]
    assert patterns.codes.dtype == np.uint8 and patterns.codes.flags.c_contiguous
    assert patterns.weights.dtype == np.float64 and patterns.site_pattern.dtype == np.int64
    assert alignment.patterns() is patterns  # cached


def test_ds1_patterns_expand_back_to_the_alignment():
    alignment = load_alignment(DS1)
    patterns = alignment.patterns()
    assert (alignment.n_taxa, alignment.n_sites) == (27, 1949)
    # IQ-TREE 2.0.7: "27 sequences with 1949 columns, 934 distinct patterns"
    assert patterns.n_patterns == 934
    assert patterns.weights.sum() == 1949
    assert np.array_equal(patterns.codes[:, patterns.site_pattern], alignment.codes)
    assert len({patterns.codes[:, k].tobytes() for k in range(patterns.n_patterns)}) == 934


# ------------------------------------------------------------------------------ empirical frequencies


def test_frequencies_without_ambiguity_are_plain_counts():
    alignment = parse_alignment(">a\nAAAC\n>b\nAACG\n>c\nACGT\n>d\nAAAA\n")
    np.testing.assert_allclose(
        alignment.empirical_frequencies(), np.array([10, 3, 2, 1]) / 16, rtol=0, atol=1e-15
    )


def test_gaps_damp_the_eight_em_rounds_as_in_iqtree():
    # c = counts of A,C,G,T (C = 16 characters), U = 4 gaps. Each round is f <- (c + U f) / (C + U),
    # so after 8 rounds from 1/4: f = p + (U / (C + U))**8 * (1/4 - p), p = c / C.
    alignment = parse_alignment(">a\nAAAC-\n>b\nAACG-\n>c\nACGT-\n>d\nAAAA-\n")
    p = np.array([10, 3, 2, 1]) / 16
    expected = p + (4 / 20) ** 8 * (0.25 - p)
    np.testing.assert_allclose(alignment.empirical_frequencies(), expected, rtol=0, atol=1e-15)


# ------------------------------------------------------------------------------------- content hash


def test_content_hash_is_stable_and_sensitive():
    alignment = expected_alignment()
    digest = alignment.content_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert parse_alignment(NEXUS_DATA, source="elsewhere").content_hash() == digest  # source is not content
    assert digest == HASH_OF_EXPECTED  # same value in every run and on every machine
    changed_site = Alignment(taxa=TAXA, codes=np.where(alignment.codes == 10, 2, alignment.codes))
    renamed = parse_alignment(FASTA.replace(">Pan", ">Pan_t"))
    reordered = Alignment(taxa=TAXA[::-1], codes=alignment.codes[::-1])
    hashes = {digest, changed_site.content_hash(), renamed.content_hash(), reordered.content_hash()}
    assert len(hashes) == 4
    assert hash(alignment) == hash(parse_alignment(FASTA))


HASH_OF_EXPECTED = "8c88f5162f83c5bd91eeda948fec2991c2f22f9b162588772f4e8b5ac2d6e628"
