"""Random start trees, JC69 distances and neighbour joining."""

import math
from collections import Counter

import numpy as np
import pytest

from phylorl.phylo.alignment import Alignment
from phylorl.phylo.simulate import simulate_dataset
from phylorl.phylo.splits import rf_distance, split_lengths, topology_hash
from phylorl.phylo.starts import MAX_JC_DISTANCE, jc_distances, nj_tree, random_tree
from phylorl.phylo.tree import Tree

CODE = {"A": 1, "C": 2, "G": 4, "T": 8, "R": 5, "N": 15, "-": 15}


def alignment(rows: dict[str, str]) -> Alignment:
    codes = np.array([[CODE[c] for c in seq] for seq in rows.values()], dtype=np.uint8)
    return Alignment(tuple(rows), codes)


def names(n):
    return [f"t{i}" for i in range(n)]


def test_random_tree_is_valid_and_reproducible():
    for n in (3, 4, 17, 200):
        tree = random_tree(names(n), np.random.default_rng(n), mean_length=0.05)
        tree.validate()
        assert tree.taxa == tuple(names(n))
        assert (tree.lengths >= 1e-6).all()
        same = random_tree(names(n), np.random.default_rng(n), mean_length=0.05)
        assert np.array_equal(tree.edges, same.edges) and np.array_equal(tree.lengths, same.lengths)
    big = random_tree(names(2000), np.random.default_rng(0), mean_length=0.05)
    assert big.lengths.mean() == pytest.approx(0.05, rel=0.1)


def test_random_tree_draws_topologies_uniformly():
    # 5 leaves have 15 unrooted topologies; 3000 draws give each 200 expected (sd ~ 13.7)
    rng = np.random.default_rng(11)
    counts = Counter(topology_hash(random_tree(names(5), rng)) for _ in range(3000))
    assert len(counts) == 15
    assert min(counts.values()) > 140 and max(counts.values()) < 260


def test_jc_distance_by_hand():
    aln = alignment({"a": "AAAAACGT", "b": "AAAACCGT", "c": "ARN-ACGT", "d": "CCCCAAAA"})
    dist = jc_distances(aln)
    # a-b: 1 difference in 8 sites; a-c: only 5 unambiguous shared sites, none differ
    assert dist[0, 1] == pytest.approx(-0.75 * math.log(1 - 4 / 3 * (1 / 8)))
    assert dist[0, 2] == 0.0
    # b-c: shared unambiguous sites 0,4,5,6,7; site 4 differs (C vs A)
    assert dist[1, 2] == pytest.approx(-0.75 * math.log(1 - 4 / 3 * (1 / 5)))
    # a-d differ at 7 of 8 sites (p = 7/8 >= 3/4): saturated, capped
    assert dist[0, 3] == MAX_JC_DISTANCE
    assert np.array_equal(dist, dist.T) and (np.diag(dist) == 0).all()


def test_jc_distance_without_shared_sites_is_capped():
    aln = alignment({"a": "AC--", "b": "--GT", "c": "ACGT"})
    assert jc_distances(aln)[0, 1] == MAX_JC_DISTANCE


def _path_distances(tree: Tree) -> np.ndarray:
    n = tree.n_leaves
    dist = np.zeros((n, n))
    for leaf in range(n):
        order, parent = tree.preorder(root=leaf)
        depth = np.zeros(tree.n_nodes)
        for v in order[1:]:
            depth[v] = depth[parent[v]] + tree.lengths[tree.edge_between(int(v), int(parent[v]))]
        dist[leaf] = depth[:n]
    return dist


def test_nj_recovers_a_tree_from_its_additive_distances():
    rng = np.random.default_rng(5)
    for n in (3, 4, 8, 30, 120):
        true = random_tree(names(n), rng)
        true.lengths[:] = rng.uniform(0.01, 0.5, size=true.n_edges)
        got = nj_tree(_path_distances(true), taxa=true.taxa)
        got.validate()
        assert rf_distance(true, got) == 0
        assert split_lengths(got) == pytest.approx(split_lengths(true), abs=1e-9)


def test_nj_on_an_alignment_is_deterministic_and_clamps_negative_lengths():
    aln = alignment({
        "a": "AAAAAAAAAACCCCCGGGGT", "b": "AAAAAAAAAACCCCCGGGTT", "c": "AAAAAACCCCCCCCCGGGGT",
        "d": "AAAAAACCCCCCCCAGGGGT", "e": "CAAAAACCCCCCCCAGGGGA",
    })  # fmt: skip
    tree = nj_tree(aln)
    assert tree.taxa == aln.taxa
    assert (tree.lengths >= 1e-6).all()
    again = nj_tree(aln)
    assert np.array_equal(tree.edges, again.edges) and np.array_equal(tree.lengths, again.lengths)
    # a distance matrix that forces a negative NJ length: d(a,b) far larger than the rest
    dist = np.array([[0, 1.0, 0.1, 0.1], [1.0, 0, 0.1, 0.1], [0.1, 0.1, 0, 0.1], [0.1, 0.1, 0.1, 0]])
    clamped = nj_tree(dist, taxa=["a", "b", "c", "d"])
    assert clamped.lengths.min() == 1e-6


@pytest.mark.parametrize(
    "dist, taxa, message",
    [
        (np.zeros((3, 3)), None, "needs taxa"),
        (np.zeros((3, 3)), ["a", "b"], r"shape \(3, 3\), expected \(2, 2\)"),
        (np.array([[0, 1, 2], [1, 0, 1], [1, 1, 0.0]]), ["a", "b", "c"], "symmetric"),
    ],
)
def test_nj_rejects_bad_distances(dist, taxa, message):
    with pytest.raises(ValueError, match=message):
        nj_tree(dist, taxa=taxa)


def test_nj_joins_give_the_textbook_numpy_tree():
    from oracles.nj import nj_joins

    from phylorl.phylo.starts import _nj_joins

    rng = np.random.default_rng(11)
    for n in (4, 5, 9, 40, 150):
        sim = simulate_dataset(n, 3000, rng)
        matrices = [_path_distances(sim.tree)]
        if len(np.unique(sim.alignment.codes, axis=0)) == n:  # identical sequences tie in Q
            matrices.append(jc_distances(sim.alignment))
        for dist in matrices:
            want_edges, want_lengths = nj_joins(dist)
            edges, lengths = _nj_joins(dist.copy())
            want = Tree.from_edges(want_edges, want_lengths, sim.tree.taxa)
            got = Tree.from_edges(edges, lengths, sim.tree.taxa)
            assert rf_distance(got, want) == 0
            assert split_lengths(got) == pytest.approx(split_lengths(want), rel=1e-9, abs=1e-12)
    # exact ties (every distance equal): the first pair in row-major order, then the new node and the next row
    flat = np.ones((6, 6)) - np.eye(6)
    edges, _ = _nj_joins(flat.copy())
    assert edges[:6].tolist() == [[0, 6], [1, 6], [6, 7], [2, 7], [7, 8], [3, 8]]
