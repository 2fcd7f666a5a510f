"""The feature sets against plain Python recomputations (through the oracle that writes them out move by move,
which ``test_collate.py`` holds equal to the compiled record passes), and the parsimony columns' table."""

import numpy as np
import pytest
from oracles.features import observation_arrays

from phylorl.env.observation import AlignmentSignals, observe
from phylorl.phylo import enumerate_moves, move_metadata, parse_model, random_tree
from phylorl.phylo.bootstrap import edge_supports, nj_bootstrap_supports
from phylorl.phylo.parsimony import spr_parsimony_deltas
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from phylorl.types import feature_sizes


@pytest.fixture(scope="module")
def signals_and_tree():
    alignment = simulate_dataset(11, 300, dataset_rng(2, 0), model=parse_model("JC")).alignment
    signals = AlignmentSignals.of(alignment, nj_bootstrap_supports(alignment, 20, seed=0))
    return signals, random_tree(alignment.taxa, np.random.default_rng(5))


def side(tree, start, away):
    """Leaves, total length and longest branch of the subtree at ``start`` seen from ``away``."""
    leaves, total, longest, stack = 0, 0.0, 0.0, [(start, away)]
    while stack:
        v, parent = stack.pop()
        leaves += v < tree.n_leaves
        for k, u in enumerate(tree.neighbors[v]):
            if u >= 0 and u != parent:
                length = tree.lengths[tree.node_edges[v, k]]
                total += length
                longest = max(longest, length)
                stack.append((int(u), v))
    return leaves, total, longest


def path_length(tree, a, b):
    stack = [(a, -1, 0.0)]
    while stack:
        v, parent, dist = stack.pop()
        if v == b:
            return dist
        for k, u in enumerate(tree.neighbors[v]):
            if u >= 0 and u != parent:
                stack.append((int(u), v, dist + tree.lengths[tree.node_edges[v, k]]))
    raise AssertionError("no path")


def test_rich_features_equal_plain_recomputation(signals_and_tree):
    signals, tree = signals_and_tree
    moves = enumerate_moves(tree)
    obs = observation_arrays(observe(tree, moves, "rich", signals))
    node, edge, meta = feature_sizes("rich")
    assert obs["node_features"].shape[1] == node and obs["edge_attr"].shape[1] == edge
    assert obs["action_meta"].shape == (len(moves), meta)
    n, total = tree.n_leaves, tree.lengths.sum()
    support = edge_supports(tree, signals.supports)
    distance = move_metadata(tree, moves)[:, 2]
    deltas, length = spr_parsimony_deltas(tree, moves, signals.tips, signals.weights)
    edge_of = lambda a, b: tree.edge_between(a, b)  # noqa: E731
    for i, (p, s, x, y) in enumerate(moves.tolist()):
        f = obs["action_meta"][i].astype(np.float64)
        joined = sum(tree.lengths[edge_of(p, u)] for u in tree.neighbors[p] if u != s)
        pruned = side(tree, s, p)
        beyond = side(tree, y, x)
        regraft = tree.lengths[edge_of(x, y)]
        expected = [
            np.log(tree.lengths[edge_of(p, s)]),
            np.log(regraft),
            np.log(joined),
            distance[i] / 10,
            (path_length(tree, p, x) + regraft / 2) / total,
            pruned[0] / n,
            beyond[0] / n,
            pruned[1] / total,
            beyond[1] / total,
            pruned[2] / total,
            deltas[i] * 100 / length,
            min(deltas[i] - deltas.min(), 20) / 5,
        ]
        np.testing.assert_allclose(f[:12], expected, rtol=1e-5, atol=1e-6)
        assert f[13] == pytest.approx(support[edge_of(p, s)]) and f[14] == pytest.approx(
            support[edge_of(x, y)]
        )
    # rank: mean position among the moves sorted by parsimony change, scaled to 0..1
    rank = obs["action_meta"][:, 12].astype(np.float64)
    position = np.argsort(np.argsort(deltas, kind="stable"), kind="stable")
    for value in np.unique(deltas):
        tied = deltas == value
        assert np.ptp(rank[tied]) == 0.0
        assert rank[tied][0] == pytest.approx(position[tied].mean() / (len(moves) - 1))
    np.testing.assert_allclose(obs["edge_attr"][0::2, 2], support, atol=1e-7)


def test_basic_features_are_the_original_observation(signals_and_tree):
    signals, tree = signals_and_tree
    moves = enumerate_moves(tree)
    obs = observation_arrays(observe(tree, moves, "basic", signals))
    np.testing.assert_allclose(obs["action_meta"], move_metadata(tree, moves), rtol=1e-6)
    assert obs["edge_attr"].shape[1] == 1 and obs["node_features"][:, 0].tolist() == [1.0] * 11 + [0.0] * 9


def test_rich_needs_signals_and_unknown_sets_are_named(signals_and_tree):
    _, tree = signals_and_tree
    with pytest.raises(ValueError, match="signals"):
        observe(tree, enumerate_moves(tree), "rich")
    with pytest.raises(ValueError, match="fancy"):
        feature_sizes("fancy")


@pytest.mark.parametrize("kind", ["whole", "fractional", "wide", "one", "equal"])
def test_parsimony_columns_equal_the_sorting_formula_bit_for_bit(kind):
    """Columns 10-12 by the per-value table (whole changes) or by sorting equal the argsort/unique formula."""
    from phylorl.records.parsimony import parsimony_table

    rng = np.random.default_rng(len(kind))
    deltas = {
        "whole": rng.integers(-30, 90, 700).astype(np.float64),
        "fractional": rng.integers(-30, 90, 700) + rng.choice([0.0, 0.5], 700),
        "wide": rng.choice([-1e6, 0.0, 3.0, 1e6], 500),
        "one": np.array([4.0]),
        "equal": np.full(9, 2.0),
    }[kind]
    table, rows = np.zeros((len(deltas) + 2, 3), np.float32), np.zeros(len(deltas), np.int32)
    parsimony_table(deltas, 731.0, table, rows, 2)
    out = np.zeros((len(deltas), 15), np.float32)
    out[:, 10:13] = table[rows]
    order = np.argsort(deltas, kind="stable")
    ranks = np.empty(len(deltas))
    ranks[order] = np.arange(len(deltas))
    _, inverse = np.unique(deltas, return_inverse=True)
    mean_rank = np.bincount(inverse, weights=ranks) / np.bincount(inverse)
    expected = np.stack(
        [
            deltas * 100.0 / 731.0,
            np.minimum(deltas - deltas.min(), 20.0) / 5.0,
            mean_rank[inverse] / max(len(deltas) - 1, 1),
        ],
        axis=1,
    ).astype(np.float32)
    assert out[:, 10:13].tobytes() == expected.tobytes()
