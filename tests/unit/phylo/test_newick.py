"""Newick reading (through DendroPy) and writing."""

import numpy as np
import pytest

from phylorl.phylo.alignment import Alignment
from phylorl.phylo.newick import DEFAULT_BRANCH_LENGTH, TreeError, read_newick, write_newick
from phylorl.phylo.splits import split_lengths, splits
from phylorl.phylo.starts import random_tree

ABCDE = ["A", "B", "C", "D", "E"]


def test_leaves_follow_alignment_order_and_lengths_are_read():
    alignment = Alignment(("E", "D", "C", "B", "A"), np.ones((5, 3), dtype=np.uint8))
    tree = read_newick("  ((A:1,B:2):3,C:4,(D:5,E:6):7);", alignment)
    assert tree.taxa == ("E", "D", "C", "B", "A")
    for leaf, length in zip(range(5), [6.0, 5.0, 4.0, 2.0, 1.0]):
        assert tree.lengths[tree.node_edges[leaf, 0]] == length
    assert sorted(tree.lengths.tolist()) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_rooted_input_merges_the_root_edges():
    tree = read_newick("((A:1,B:2):0.5,(C:3,(D:4,E:5):6):0.25)root:9;", ABCDE)
    # the root's two edges become one internal edge {A,B}|{C,D,E} of length 0.75
    assert split_lengths(tree)[0b11100] == 0.75
    assert splits(tree) == frozenset({0b11100, 0b11000})
    assert tree.lengths.sum() == pytest.approx(1 + 2 + 0.75 + 3 + 4 + 5 + 6)


def test_missing_lengths_default_and_one_child_nodes_are_suppressed():
    tree = read_newick("(((A)),B:2,(C,D):1);", ["A", "B", "C", "D"])
    lengths = split_lengths(tree)
    assert lengths[0b0010] == 2.0 and lengths[0b1100] == 1.0
    assert lengths[0b1110] == DEFAULT_BRANCH_LENGTH  # A: three missing lengths merge into one default
    assert lengths[0b0100] == lengths[0b1000] == DEFAULT_BRANCH_LENGTH


def test_names_with_underscores_spaces_and_quotes_round_trip(tmp_path):
    taxa = ["a_b", "c d", "it's", "x(y)", "plain"]
    tree = random_tree(taxa, np.random.default_rng(0))
    text = write_newick(tree)
    assert "a_b:" in text and "'c d':" in text and "'it''s':" in text and "'x(y)':" in text
    assert text.endswith(";")
    path = tmp_path / "t.nwk"
    path.write_text(text + "\n")
    for source in (text, path, str(path)):
        again = read_newick(source, taxa)
        assert split_lengths(again) == pytest.approx(split_lengths(tree), rel=1e-9)


def test_round_trip_keeps_splits_and_lengths():
    rng = np.random.default_rng(7)
    for n in (3, 4, 10, 60):
        tree = random_tree([f"t{i}" for i in range(n)], rng)
        again = read_newick(write_newick(tree), tree.taxa)
        assert splits(again) == splits(tree)
        assert split_lengths(again) == pytest.approx(split_lengths(tree), rel=1e-9)


def test_lengths_are_written_with_ten_significant_digits():
    tree = read_newick("(A:0.123456789012,B:1e-7,C:2);", ["A", "B", "C"])
    assert write_newick(tree) == "(A:0.123456789,B:1e-07,C:2);"


def test_polytomy_is_an_error_by_default():
    with pytest.raises(
        TreeError,
        match=r"polytomy \(a node with 4 neighbours, over leaves 'C', 'D', 'E'\).*"
        r"resolve_polytomies=True",
    ):
        read_newick("(A,B,(C,D,E));", ABCDE)


def test_polytomy_resolution_is_deterministic_and_binary():
    tree = read_newick("(A:1,B:2,(C:3,D:4,E:5,F:6):7);", list("ABCDEF"), resolve_polytomies=True)
    tree.validate()
    assert sorted(tree.lengths.tolist()) == [1e-6, 1e-6, 1, 2, 3, 4, 5, 6, 7]
    # the resolved tree keeps the input's split {C,D,E,F} and refines the polytomy
    assert 0b111100 in splits(tree)
    again = read_newick("(A:1,B:2,(C:3,D:4,E:5,F:6):7);", list("ABCDEF"), resolve_polytomies=True)
    assert splits(again) == splits(tree)


@pytest.mark.parametrize(
    "text, taxa, message",
    [
        (
            "(A,B,(C,D));",
            ABCDE,
            r"in the tree but not the alignment \[\]; in the alignment but not the tree \['E'\]",
        ),
        (
            "(A,B,(C,F));",
            ["A", "B", "C", "D"],
            r"not the alignment \['F'\]; in the alignment but not the tree \['D'\]",
        ),
        ("(A,A,(C,D));", ["A", "C", "D"], r"duplicate leaf names in the tree: \['A'\]"),
        ("(A:-0.5,B,(C,D));", ["A", "B", "C", "D"], r"branch above 'A' has length -0.5"),
        ("(A,B,(C,D);", ["A", "B", "C", "D"], r"cannot parse Newick"),
        ("no_such_file.nwk", ["A", "B", "C", "D"], r"no Newick file"),
    ],
)
def test_bad_trees_raise_tree_errors(text, taxa, message):
    with pytest.raises(TreeError, match=message):
        read_newick(text, taxa)


def test_tree_error_is_a_value_error():
    assert issubclass(TreeError, ValueError)
