"""Lazy SPR scores (:mod:`phylorl.phylo.lazy_spr`) against the move applied to a copy of the tree and the
branches at its regraft point optimised one by one by the engine's own Newton, for every move, on models with
and without rate categories and invariant sites, with tips on every side and scaling forced."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.phylo import LikelihoodEngine, apply_spr, enumerate_moves, move_metadata, random_tree
from phylorl.phylo.simulate import simulate_dataset


def reference_scores(engine: LikelihoodEngine, tree, moves, branches: int) -> np.ndarray:
    """Each move applied to a copy, then Newton on the pendant ``(p, s)`` and (``branches=3``) on ``(x, p)``
    and ``(p, y)``, one branch after the other."""
    out = np.empty(len(moves))
    for i, move in enumerate(moves):
        after = tree.copy()
        apply_spr(after, move)
        p, s, x, y = (int(v) for v in move)
        ends = [s, x, y][:branches]
        for end in ends:
            edge = int(after.node_edges[p, list(after.neighbors[p]).index(end)])
            out[i] = engine.optimize_branch_lengths(after, np.array([edge]), rounds=1)
    return out


@pytest.mark.parametrize("branches", [1, 3])
@pytest.mark.parametrize("model,taxa,seed", [("JC", 7, 0), ("GTR+F+G4", 12, 1), ("HKY+I+G4", 10, 2)])
def test_lazy_scores_equal_the_move_with_the_branches_at_its_regraft_point_optimised(
    model, taxa, seed, branches
):
    rng = np.random.default_rng(seed)
    data = simulate_dataset(taxa, 300, rng)
    engine = LikelihoodEngine(data.alignment, model)
    tree = random_tree(data.alignment.taxa, rng)
    tree.lengths[:] = rng.uniform(0.01, 0.3, size=tree.n_edges)
    moves = enumerate_moves(tree)  # every SPR neighbour, every radius
    before = tree.lengths.copy(), tree.edges.copy()
    lazy = engine.spr_scores(tree, moves, branches=branches)
    assert np.array_equal(tree.lengths, before[0]) and np.array_equal(tree.edges, before[1])
    assert engine.n_lazy_scores == len(moves)
    np.testing.assert_allclose(lazy, reference_scores(engine, tree, moves, branches), rtol=0, atol=1e-6)


def test_lazy_scores_with_scaling_on_a_long_tree():
    """Long branches and many taxa drive partials below the scaling threshold, so the scale counts of every
    product the lazy pass forms are checked too."""
    rng = np.random.default_rng(5)
    data = simulate_dataset(150, 100, rng)
    engine = LikelihoodEngine(data.alignment, "JC")
    tree = random_tree(data.alignment.taxa, rng)
    tree.lengths[:] = 5.0
    engine.loglik(tree)
    assert engine._b.scale.max() > 0  # scaling happened
    moves = enumerate_moves(tree, radius=4)
    pick = np.sort(rng.choice(len(moves), size=150, replace=False))
    for branches in (1, 3):
        np.testing.assert_allclose(
            engine.spr_scores(tree, moves[pick], branches=branches),
            reference_scores(engine, tree, moves[pick], branches),
            rtol=0,
            atol=1e-6,
        )


def test_lazy_scores_take_moves_in_any_order_and_reject_bad_ones():
    rng = np.random.default_rng(3)
    data = simulate_dataset(9, 200, rng)
    engine = LikelihoodEngine(data.alignment, "JC")
    tree = random_tree(data.alignment.taxa, rng)
    moves = enumerate_moves(tree)
    shuffled = rng.permutation(len(moves))
    np.testing.assert_allclose(
        engine.spr_scores(tree, moves[shuffled]), engine.spr_scores(tree, moves)[shuffled], rtol=0, atol=1e-9
    )
    p, s, x, y = moves[0]
    # x the farther end of its edge; p a leaf; a regraft edge incident to p
    for bad in ([p, s, y, x], [0, int(tree.neighbors[0, 0]), x, y], [p, s, p, s]):
        with pytest.raises(ValueError, match="not an SPR move"):
            engine.spr_scores(tree, np.array([bad]))
    with pytest.raises(ValueError, match="repeats"):
        engine.spr_scores(tree, moves[[0, 0]])
    with pytest.raises(ValueError, match="branches"):
        engine.spr_scores(tree, moves, branches=2)
    with pytest.raises(ValueError, match="shape"):
        engine.spr_scores(tree, moves[:, :3])


@pytest.mark.parametrize("model", ["JC", "GTR+F+G4", "HKY+I+G4"])
def test_fixed_length_scores_equal_the_moved_tree(model):
    """``branches=0``: the log-likelihood of the tree as apply_spr leaves it, scored from scratch."""
    rng = np.random.default_rng(8)
    data = simulate_dataset(11, 250, rng)
    engine = LikelihoodEngine(data.alignment, model)
    tree = random_tree(data.alignment.taxa, rng)
    tree.lengths[:] = rng.uniform(0.01, 0.4, size=tree.n_edges)
    moves = enumerate_moves(tree)
    lazy = engine.spr_scores(tree, moves, branches=0)
    fresh = LikelihoodEngine(data.alignment, engine.model)
    expected = []
    for move in moves:
        after = tree.copy()
        apply_spr(after, move)
        expected.append(fresh.loglik(after))
    np.testing.assert_allclose(lazy, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dedupe", [True, False])
def test_subtree_scores_are_the_radius_band_of_every_move(dedupe):
    rng = np.random.default_rng(9)
    data = simulate_dataset(40, 200, rng)
    engine = LikelihoodEngine(data.alignment, "GTR+F+G4")
    tree = random_tree(data.alignment.taxa, rng)
    every = enumerate_moves(tree, dedupe=dedupe)
    distance = move_metadata(tree, every)[:, 2] - 1
    everything = dict(zip(map(tuple, every.tolist()), engine.spr_scores(tree, every, branches=0)))
    for p in range(tree.n_leaves, tree.n_nodes, 7):
        for s in tree.neighbors[p]:
            for lo, hi in ((1, 3), (2, 5), (4, 40)):
                moves, scores = engine.subtree_scores(
                    tree, int(p), int(s), hi, radius_min=lo, branches=0, dedupe=dedupe
                )
                want = (every[:, 0] == p) & (every[:, 1] == s) & (distance >= lo) & (distance <= hi)
                assert sorted(map(tuple, moves.tolist())) == sorted(map(tuple, every[want].tolist()))
                np.testing.assert_allclose(
                    scores, [everything[tuple(m)] for m in moves.tolist()], rtol=0, atol=1e-8
                )


@pytest.mark.parametrize("branches", [0, 1, 3])
def test_a_lazy_score_never_exceeds_the_move_with_every_branch_optimised(branches):
    rng = np.random.default_rng(10)
    data = simulate_dataset(14, 300, rng)
    engine = LikelihoodEngine(data.alignment, "GTR+F+G4")
    tree = random_tree(data.alignment.taxa, rng)
    engine.optimize_branch_lengths(tree, rounds=3)
    moves = enumerate_moves(tree)
    pick = moves[np.sort(rng.choice(len(moves), size=60, replace=False))]
    lazy = engine.spr_scores(tree, pick, branches=branches)
    for move, score in zip(pick, lazy):
        after = tree.copy()
        apply_spr(after, move)
        assert score <= engine.optimize_branch_lengths(after, rounds=20, tol=1e-6) + 1e-6


def test_a_subtree_cutoff_only_leaves_out_regrafts_behind_poor_ones():
    rng = np.random.default_rng(13)
    data = simulate_dataset(40, 300, rng)
    engine = LikelihoodEngine(data.alignment, "GTR+F+G4")
    tree = random_tree(data.alignment.taxa, rng)
    loglik = engine.optimize_branch_lengths(tree, rounds=2)
    skipped = 0
    for p in range(tree.n_leaves, tree.n_nodes, 3):
        for s in tree.neighbors[p]:
            moves, every = engine.subtree_scores(tree, p, int(s), 12, branches=0)
            cut_moves, cut = engine.subtree_scores(
                tree, p, int(s), 12, branches=0, reference=loglik, cutoff=1.0
            )
            assert np.array_equal(moves, cut_moves)
            kept = np.isfinite(cut)
            np.testing.assert_allclose(cut[kept], every[kept], rtol=0, atol=1e-9)
            assert np.all(cut[~kept] == -np.inf)
            skipped += int((~kept).sum())
    assert skipped > 0
