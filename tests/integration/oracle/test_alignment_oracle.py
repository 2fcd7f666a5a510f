"""Alignment reading against IQ-TREE 2 (``iqtree2``, run live through the ``iqtree_fixed`` fixture, and its
recorded output): site patterns and empirical frequencies, ambiguity codes included."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from phylorl.phylo.alignment import load_alignment, parse_alignment

# IQ-TREE 2.0.7 ("iqtree2 -s AMBIG.fa -st DNA -m GTR+F -te TREE -blfix -v"), its 10-digit verbose line
# "Empirical state frequencies: 0.2624322144 0.2142731996 0.2148956103 0.3083989757".
AMBIG = """>t1
ACGTRYNN-ACGTTA?
>t2
ACGTACGTACG-TTAA
>t3
AAGTSWKMBDHVACGT
>t4
CCGT--GTACGTTTAA
>t5
GCGTACGTAYRTTTCC
"""
AMBIG_IQTREE_FREQS = [0.2624322144, 0.2142731996, 0.2148956103, 0.3083989757]


def test_ambiguity_codes_match_recorded_iqtree_frequencies():
    freqs = parse_alignment(AMBIG).empirical_frequencies()
    np.testing.assert_allclose(freqs, AMBIG_IQTREE_FREQS, rtol=0, atol=5e-11)


def caterpillar(taxa) -> str:
    """Newick of the caterpillar tree (t0,t1,(t2,(t3,...))) with all branches 0.1."""
    newick = f"{taxa[-1]}:0.1"
    for name in reversed(taxa[2:-1]):
        newick = f"({name}:0.1,{newick}):0.1"
    return f"({taxa[0]}:0.1,{taxa[1]}:0.1,{newick});"


def run_iqtree(iqtree_fixed, alignment_path: Path, taxa) -> tuple[str, str]:
    """iqtree2 (GTR+F, the caterpillar tree with fixed branch lengths, verbose); returns (stdout, the
    report)."""
    run = iqtree_fixed(alignment_path, caterpillar(taxa), "GTR+F", "-st", "DNA", "-v")
    return run.stdout, run.report


def iqtree_figures(stdout: str, report: str) -> tuple[tuple[int, int, int], list[float], list[float]]:
    counts = re.search(r"Alignment has (\d+) sequences with (\d+) columns, (\d+) distinct patterns", stdout)
    verbose = re.search(r"Empirical state frequencies: ([0-9. ]+)", stdout)
    printed = [float(re.search(rf"pi\({base}\) = ([0-9.]+)", report)[1]) for base in "ACGT"]
    return tuple(int(x) for x in counts.groups()), [float(x) for x in verbose[1].split()], printed


def repeated_columns(text: str) -> str:
    """AMBIG plus its first 8 columns again with '-' and 'N' swapped (same masks: 16 patterns, 24 sites)."""
    swap = str.maketrans("-N", "N-")
    lines = [line if line.startswith(">") else line + line[:8].translate(swap) for line in text.splitlines()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text",
    [AMBIG, AMBIG.replace("?", "N") + ">t6\nRRRRYYYY--NNACGT\n", repeated_columns(AMBIG)],
    ids=["ambiguity", "six-taxa", "repeated-columns"],
)
def test_frequencies_and_patterns_match_live_iqtree(tmp_path, iqtree_fixed, text):
    path = tmp_path / "ambig.fasta"
    path.write_text(text)
    alignment = load_alignment(path)
    (n_seq, n_col, n_pat), verbose, printed = iqtree_figures(*run_iqtree(iqtree_fixed, path, alignment.taxa))
    assert (n_seq, n_col, n_pat) == (alignment.n_taxa, alignment.n_sites, alignment.patterns().n_patterns)
    freqs = alignment.empirical_frequencies()
    np.testing.assert_allclose(freqs, verbose, rtol=0, atol=5e-11)  # 10 printed digits
    np.testing.assert_allclose(freqs, printed, rtol=0, atol=5e-5)  # the report's 4 digits


def test_ds1_frequencies_and_patterns_match_live_iqtree(ds_dir, iqtree_fixed):
    alignment = load_alignment(ds_dir / "DS1.fasta")
    (n_seq, n_col, n_pat), verbose, printed = iqtree_figures(
        *run_iqtree(iqtree_fixed, ds_dir / "DS1.fasta", alignment.taxa)
    )
    assert (n_seq, n_col, n_pat) == (27, 1949, alignment.patterns().n_patterns) == (27, 1949, 934)
    np.testing.assert_allclose(alignment.empirical_frequencies(), verbose, rtol=0, atol=5e-11)
    np.testing.assert_allclose(alignment.empirical_frequencies(), printed, rtol=0, atol=5e-5)
