"""SPR moves: enumeration counts and de-duplication, radius, metadata, apply_spr's edge-id contract."""

import numpy as np
import pytest

from phylorl.phylo.newick import read_newick
from phylorl.phylo.splits import rf_distance, splits, topology_hash
from phylorl.phylo.spr import apply_spr, enumerate_moves, move_metadata, spr_neighbor
from phylorl.phylo.starts import random_tree


def names(n):
    return [f"t{i}" for i in range(n)]


def spr_count(n):
    return 2 * (n - 3) * (2 * n - 7)


@pytest.mark.parametrize("n", [4, 5, 6, 7, 8, 9, 10, 11, 12, 20])
def test_deduped_moves_give_every_spr_neighbour_exactly_once(n):
    rng = np.random.default_rng(n)
    for _ in range(3 if n < 20 else 1):
        tree = random_tree(names(n), rng)
        moves = enumerate_moves(tree)
        assert moves.shape == (spr_count(n), 4) and moves.dtype == np.int64
        hashes = [topology_hash(spr_neighbor(tree, move)) for move in moves]
        assert len(set(hashes)) == len(hashes)
        assert topology_hash(tree) not in hashes
        # without de-duplication: 6(n-3) more moves (each NNI four times), no new topology
        every = enumerate_moves(tree, dedupe=False)
        assert len(every) == spr_count(n) + 6 * (n - 3)
        assert {topology_hash(spr_neighbor(tree, move)) for move in every} == set(hashes)


def test_tiny_trees():
    assert enumerate_moves(random_tree(names(3), np.random.default_rng(0))).shape == (0, 4)
    four = read_newick("((A,B),C,D);", ["A", "B", "C", "D"])
    moves = enumerate_moves(four)
    # the other two quartets: {A,C}|{B,D} (mask {B,D}) and {A,D}|{B,C} (mask {B,C})
    assert {splits(spr_neighbor(four, move)) for move in moves} == {frozenset({0b1010}), frozenset({0b0110})}


def test_order_is_deterministic_and_moves_are_well_formed():
    tree = random_tree(names(15), np.random.default_rng(2))
    moves = enumerate_moves(tree)
    assert np.array_equal(moves, enumerate_moves(tree.copy()))
    assert (np.diff(moves[:, 0]) >= 0).all()  # grouped by p
    for p, s, x, y in moves.tolist():
        assert p >= tree.n_leaves and s in tree.neighbors[p] and y in tree.neighbors[x]
        assert x != p and y != p


def _documented_order(tree, radius, dedupe):
    """The moves in the order ``enumerate_moves`` documents, written plainly: by ``p``, ``s``'s slot, the
    regraft side's slot, then a depth-first preorder walk away from ``p`` (children in slot order)."""
    nb, n, out = tree.neighbors, tree.n_leaves, []
    for p in range(n, tree.n_nodes):
        for k in range(3):
            s = int(nb[p, k])
            for side in range(3):
                a = int(nb[p, side])
                if side == k or a < n:
                    continue
                other = int(nb[p, 3 - k - side])

                def visit(x, up, d):
                    if not dedupe or d > 1 or (p < x and s < other):
                        out.extend((p, s, x, int(y)) for y in nb[x] if y != up)
                    if radius is None or d < radius:
                        for y in nb[x]:
                            if y != up and y >= n:
                                visit(int(y), x, d + 1)

                visit(a, p, 1)
    return np.array(out, np.int64).reshape(-1, 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_moves_come_in_the_documented_order(seed):
    tree = random_tree(names(18), np.random.default_rng(seed))
    for radius in (None, 1, 2, 4):
        for dedupe in (True, False):
            assert np.array_equal(
                enumerate_moves(tree, radius=radius, dedupe=dedupe), _documented_order(tree, radius, dedupe)
            )


def _distance(tree, u, v):
    order, parent = tree.preorder(root=u)
    d = 0
    while v != u:
        v, d = int(parent[v]), d + 1
    return d


def test_radius_keeps_moves_within_that_many_edges():
    tree = random_tree(names(25), np.random.default_rng(4))
    full = enumerate_moves(tree)
    reach = np.array([_distance(tree, p, x) for p, _, x, _ in full.tolist()])
    assert reach.min() == 1 and reach.max() > 4
    for radius in (1, 2, 3, 5):
        expected = full[reach <= radius]
        assert np.array_equal(enumerate_moves(tree, radius=radius), expected)
    assert len(enumerate_moves(tree, radius=1)) == 2 * (25 - 3)  # the NNI neighbours
    assert enumerate_moves(tree, radius=0).shape == (0, 4)
    with pytest.raises(ValueError, match="radius"):
        enumerate_moves(tree, radius=-1)


def test_move_metadata_by_hand():
    taxa = ["A", "B", "C", "D", "E", "F"]
    tree = read_newick("((A:0.1,B:0.2):0.3,C:0.4,((D:0.5,E:0.6):0.7,F:0.8):0.9);", taxa)
    node_of = {name: i for i, name in enumerate(taxa)}
    ab = int(tree.neighbors[node_of["A"], 0])
    de = int(tree.neighbors[node_of["D"], 0])
    hub = int(tree.neighbors[node_of["C"], 0])
    mid = int(tree.neighbors[node_of["F"], 0])
    # prune A from its parent, regraft onto (de, E): path ab-hub-mid-de is 3 edges, plus one
    moves = np.array([[ab, node_of["A"], de, node_of["E"]], [hub, ab, mid, node_of["F"]]])
    meta = move_metadata(tree, moves)
    assert meta.dtype == np.float32
    np.testing.assert_allclose(meta, [[0.1, 0.6, 4.0], [0.3, 0.8, 2.0]], rtol=1e-6)
    full = enumerate_moves(tree)
    meta = move_metadata(tree, full)
    assert [m + 1 for m in (_distance(tree, p, x) for p, _, x, _ in full.tolist())] == meta[:, 2].tolist()
    with pytest.raises(ValueError, match="not an edge"):
        move_metadata(tree, np.array([[ab, node_of["C"], de, node_of["E"]]]))


def test_apply_spr_reuses_edge_ids_as_documented():
    rng = np.random.default_rng(8)
    tree = random_tree(names(14), rng)
    for move in enumerate_moves(tree, dedupe=False):
        p, s, x, y = (int(v) for v in move)
        after = tree.copy()
        ks = list(tree.neighbors[p]).index(s)
        ia, ib = [k for k in range(3) if k != ks]
        a, b = int(tree.neighbors[p, ia]), int(tree.neighbors[p, ib])
        e_pa, e_pb = int(tree.node_edges[p, ia]), int(tree.node_edges[p, ib])
        e_ps, e_xy = tree.edge_between(p, s), tree.edge_between(x, y)
        changed = apply_spr(after, move)
        after.validate()
        assert changed.tolist() == [e_pa, e_pb, e_xy] and changed.dtype == np.int64
        assert after.edge_between(a, b) == e_pa
        assert after.edge_between(p, y) == e_pb
        assert after.edge_between(x, p) == e_xy
        assert after.edge_between(p, s) == e_ps
        assert after.lengths[e_pa] == tree.lengths[e_pa] + tree.lengths[e_pb]
        assert after.lengths[e_pb] == after.lengths[e_xy] == tree.lengths[e_xy] / 2
        untouched = np.setdiff1d(np.arange(tree.n_edges), changed)
        assert np.array_equal(after.lengths[untouched], tree.lengths[untouched])
        assert np.array_equal(after.edges[untouched], tree.edges[untouched])
        assert after.lengths.sum() == pytest.approx(tree.lengths.sum(), rel=1e-12)


def test_a_walk_of_moves_keeps_the_tree_valid():
    rng = np.random.default_rng(9)
    tree = random_tree(names(20), rng)
    total = tree.lengths.sum()
    for _ in range(200):
        moves = enumerate_moves(tree, radius=int(rng.integers(1, 6)))
        before = tree.copy()
        apply_spr(tree, moves[rng.integers(len(moves))])
        tree.validate()
        assert rf_distance(before, tree) > 0
    assert tree.lengths.sum() == pytest.approx(total, rel=1e-9)


def test_spr_neighbor_leaves_the_input_alone():
    tree = random_tree(names(9), np.random.default_rng(1))
    before = tree.copy()
    neighbour = spr_neighbor(tree, enumerate_moves(tree)[-1])
    assert np.array_equal(tree.neighbors, before.neighbors) and np.array_equal(tree.lengths, before.lengths)
    assert rf_distance(tree, neighbour) > 0


def test_invalid_moves_raise_and_leave_the_tree_untouched():
    taxa = ["A", "B", "C", "D", "E", "F"]
    tree = read_newick("((A,B),C,((D,E),F));", taxa)
    A, B, C, D, E, F = range(6)
    ab, hub, de = int(tree.neighbors[A, 0]), int(tree.neighbors[C, 0]), int(tree.neighbors[D, 0])
    mid = int(tree.neighbors[F, 0])
    cases = [
        ((ab, A, 99, E), "out of range"),
        ((A, ab, de, E), "p is a leaf"),
        ((ab, C, de, E), "s is not a neighbour of p"),
        ((ab, A, hub, ab), "incident to p"),
        ((ab, A, de, F), "not adjacent"),
        ((ab, A, E, de), "nearer to p"),
        ((hub, mid, de, E), "in the pruned s-subtree"),
    ]
    for move, message in cases:
        before = tree.copy()
        with pytest.raises(ValueError, match=message):
            apply_spr(tree, move)
        assert np.array_equal(tree.neighbors, before.neighbors) and np.array_equal(tree.edges, before.edges)


def test_subtree_moves_are_every_move_of_that_subtree_within_the_radius_band():
    from phylorl.phylo.spr import subtree_moves

    tree = random_tree(names(30), np.random.default_rng(4))
    every = enumerate_moves(tree)
    distance = move_metadata(tree, every)[:, 2] - 1
    for p in range(tree.n_leaves, tree.n_nodes):
        for s in tree.neighbors[p]:
            for lo, hi in ((1, 1), (1, 4), (3, 6), (2, -1)):
                got = subtree_moves(tree.neighbors, tree.n_leaves, p, int(s), lo, hi, True)
                want = (
                    (every[:, 0] == p) & (every[:, 1] == s) & (distance >= lo) & ((distance <= hi) | (hi < 0))
                )
                assert np.array_equal(got, every[want])  # same moves, same order
    radius = enumerate_moves(tree, radius=3)
    assert np.array_equal(radius, every[distance <= 3])
