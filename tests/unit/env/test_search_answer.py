"""How a search of a fixed number of moves chooses its answer: the best tree seen, judged after its branches
are optimised (:class:`~phylorl.env.search.SeenTrees`), not by the step log-likelihood of a tree whose far
branches still have the lengths of an earlier topology."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.search import SeenTrees, run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.phylo import LikelihoodEngine, parse_model, random_tree
from phylorl.phylo.simulate import simulate_dataset
from phylorl.phylo.topology_key import topology_key


@pytest.fixture(scope="module")
def entry():
    data = simulate_dataset(9, 400, np.random.default_rng(11))
    return EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "HKY+G4"), "sim")


def test_seen_trees_keep_the_best_distinct_topologies(entry):
    rng = np.random.default_rng(0)
    trees = [random_tree(entry.alignment.taxa, rng) for _ in range(12)]
    trees += [t.copy() for t in trees[:4]]  # the same topologies again, with other values below
    values = rng.normal(size=len(trees))
    seen = SeenTrees(5)
    for tree, value in zip(trees, values):
        seen.add(tree, value)
    best_per_key: dict[int, float] = {}
    for tree, value in zip(trees, values):
        key = topology_key(tree)
        best_per_key[key] = max(best_per_key.get(key, -np.inf), value)
    expected = sorted(best_per_key.items(), key=lambda kv: -kv[1])[:5]
    kept = {topology_key(tree): value for value, tree in seen._trees.values()}
    assert kept == dict(expected)
    with pytest.raises(ValueError, match="capacity"):
        SeenTrees(0)


def test_the_kept_copies_are_not_the_searchs_tree(entry):
    tree = random_tree(entry.alignment.taxa, np.random.default_rng(1))
    seen = SeenTrees(3)
    seen.add(tree, -1.0)
    tree.lengths[:] = 0.5
    ((value, kept),) = seen._trees.values()
    assert kept is not tree and not np.allclose(kept.lengths, 0.5)


@pytest.mark.parametrize("seed", range(4))
def test_a_finished_random_walk_answers_with_its_best_tree_after_branch_optimisation(entry, seed):
    """Against brute force: every tree the walk visited, fully optimised on a fresh engine."""
    env = TreeEnv([entry], EnvConfig(start="random"), seed=seed)
    env.reset()
    visited = [env.tree.copy()]
    result = run_search(
        env,
        "random",
        steps=20,
        rng=np.random.default_rng(seed),
        finish=True,
        on_step=lambda step, loglik: visited.append(env.tree.copy()),
    )
    fresh = LikelihoodEngine(entry.alignment, parse_model(entry.prepared.model))
    optimised = [fresh.optimize_branch_lengths(tree.copy(), rounds=50, tol=1e-6) for tree in visited]
    assert result.best_loglik >= max(optimised) - 0.05
    assert fresh.loglik(result.best_tree) == pytest.approx(result.best_loglik, abs=1e-5)
    # the answer without rescoring: the best by step log-likelihood, then optimised; never better
    env = TreeEnv([entry], EnvConfig(start="random"), seed=seed)
    env.reset()
    plain = run_search(env, "random", steps=20, rng=np.random.default_rng(seed), finish=True, rescore=0)
    assert plain.trajectory == result.trajectory  # the same walk
    assert result.best_loglik >= plain.best_loglik - 1e-6


def test_rescoring_costs_evaluations_and_is_counted(entry):
    counts = {}
    for rescore in (0, 64):
        env = TreeEnv([entry], EnvConfig(start="random"), seed=5)
        env.reset()
        result = run_search(
            env, "random", steps=10, rng=np.random.default_rng(5), finish=True, rescore=rescore
        )
        counts[rescore] = result.evaluations
    assert counts[64] > counts[0]
