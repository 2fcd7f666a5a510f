"""Classical searches: hill-climbing on simulated data and on DS1 (against IQ-TREE's reference)."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.env.climbs import RankedClimb
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.search import run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.phylo import LikelihoodEngine, load_alignment, parse_model, spr_neighbor
from phylorl.phylo.parsimony import parsimony_tips, spr_parsimony_deltas
from phylorl.phylo.simulate import simulate_dataset
from phylorl.phylo.topology_key import topology_key


def test_hillclimb_reaches_the_true_tree_on_simulated_data():
    reached = []
    for seed in range(5):
        data = simulate_dataset(8, 1000, np.random.default_rng(100 + seed))
        prepared = prepare_alignment(data.alignment, "GTR+F+G4")
        entry = EnvAlignment.build(data.alignment, prepared, f"sim{seed}")
        env = TreeEnv([entry], EnvConfig(start="random"), seed=seed)
        env.reset()
        result = run_search(env, "hillclimb", steps=None)
        truth = data.tree.copy()
        engine = LikelihoodEngine(data.alignment, parse_model(prepared.model))
        true_loglik = engine.optimize_branch_lengths(truth, rounds=50, tol=1e-6)
        assert result.final_loglik > result.start_loglik
        reached.append(result.final_loglik >= true_loglik - 0.1)
    assert sum(reached) >= 4, reached


@pytest.mark.slow
def test_hillclimb_on_ds1_from_nj(ds_reference):
    """Hill-climbing from NJ on DS1 (JC) comes within 0.5 of IQ-TREE's reference with restarts.

    The plain climb ends at -6886.678, 2.08 below IQ-TREE's -6884.601 (RF distance 10): a genuine
    local optimum of the SPR neighbourhood (every one of its 2256 moves, each with full branch-length
    optimisation, scores lower; best -6887.58), reached from IQ-TREE's BIONJ tree as well. Perturbing
    it with 4 random short SPR moves and climbing again (iterated local search, as IQ-TREE escapes
    such optima) finds IQ-TREE's tree.
    """
    ref = ds_reference("DS1", "JC")
    aln = load_alignment(ref["alignment"])
    entry = EnvAlignment.build(aln, prepare_alignment(aln, "JC"), "DS1")
    env = TreeEnv([entry], EnvConfig(start="nj"), seed=0)
    env.reset()
    plain = run_search(env, "hillclimb", steps=None)
    assert plain.final_loglik > plain.start_loglik + 50
    # a local optimum under the search's own move evaluation
    assert env.evaluate_moves().max() <= plain.final_loglik + 1e-6
    env.reset(tree=plain.tree)
    result = run_search(env, "hillclimb", steps=None, restarts=8, rng=np.random.default_rng(0))
    assert result.final_loglik >= ref["iqtree_ml_search_best"] - 0.5
    # the value reported is the returned tree's log-likelihood
    fresh = LikelihoodEngine(aln, parse_model("JC")).loglik(result.tree)
    assert fresh == pytest.approx(result.final_loglik, abs=1e-4)


@pytest.fixture(scope="module")
def small_entry():
    data = simulate_dataset(8, 300, np.random.default_rng(7))
    return EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "HKY+G4"), "sim")


def test_random_search_returns_the_best_tree_seen(small_entry):
    env = TreeEnv([small_entry], EnvConfig(start="nj"), seed=0)
    env.reset()
    result = run_search(env, "random", steps=25, rng=np.random.default_rng(3))
    # random moves from the NJ tree make it worse somewhere along the way: best and final differ
    assert result.best_loglik == pytest.approx(max(result.start_loglik, *result.trajectory))
    assert result.best_loglik > result.final_loglik
    fresh = LikelihoodEngine(small_entry.alignment, parse_model(small_entry.prepared.model))
    assert fresh.loglik(result.best_tree) == pytest.approx(result.best_loglik, abs=1e-5)
    assert fresh.loglik(result.tree) == pytest.approx(result.final_loglik, abs=1e-5)
    assert result.tree is not env.tree and result.best_tree is not env.tree  # copies


class WorstMove:
    """A policy that always takes the move of lowest log-likelihood (so its first tree is its best)."""

    def choose(self, env):
        return int(np.argmin(env.evaluate_moves())) if len(env.moves) else None


def test_best_tree_seen_includes_the_start_tree(small_entry):
    env = TreeEnv([small_entry], EnvConfig(start="nj"), seed=0)
    env.reset()
    start_tree = env.tree.copy()
    result = run_search(env, WorstMove(), steps=3)
    assert result.steps == 3 and result.final_loglik < result.start_loglik
    assert result.best_loglik == result.start_loglik
    fresh = LikelihoodEngine(small_entry.alignment, parse_model(small_entry.prepared.model))
    assert fresh.loglik(result.best_tree) == pytest.approx(fresh.loglik(start_tree), abs=1e-9)


@pytest.mark.parametrize("policy", ["greedy", "hillclimb"])
def test_improving_searches_end_on_their_best_tree(small_entry, policy):
    env = TreeEnv([small_entry], EnvConfig(start="random"), seed=1)
    env.reset()
    result = run_search(env, policy, steps=None if policy.endswith("climb") else 30)
    assert result.best_loglik == pytest.approx(result.final_loglik, abs=1e-6)
    fresh = LikelihoodEngine(small_entry.alignment, parse_model(small_entry.prepared.model))
    assert fresh.loglik(result.best_tree) == pytest.approx(result.best_loglik, abs=1e-5)


class ByParsimony(RankedClimb):
    """A ranked climb by the parsimony change of every move (lower first)."""

    def scores(self, env):
        patterns = env.current.alignment.patterns()
        deltas, _ = spr_parsimony_deltas(
            env.tree,
            env.moves,
            parsimony_tips(patterns.codes),
            np.asarray(patterns.weights, dtype=np.float64),
        )
        return -deltas


class Unranked(RankedClimb):
    """A certified climb in move order: every move evaluated before it stops."""

    def scores(self, env):
        return np.zeros(len(env.moves))


def test_hillclimb_with_restarts_returns_its_best_tree(small_entry):
    env = TreeEnv([small_entry], EnvConfig(start="random"), seed=2)
    env.reset()
    result = run_search(env, "hillclimb", steps=None, restarts=2, rng=np.random.default_rng(0))
    assert result.best_loglik >= result.final_loglik - 1e-6
    fresh = LikelihoodEngine(small_entry.alignment, parse_model(small_entry.prepared.model))
    assert fresh.loglik(result.best_tree) == pytest.approx(result.best_loglik, abs=1e-5)
    assert fresh.loglik(result.tree) == pytest.approx(result.final_loglik, abs=1e-5)


def test_a_ranked_climb_evaluates_first_the_moves_it_ranks_highest(small_entry):
    env = TreeEnv([small_entry], EnvConfig(start="random"), seed=3)
    env.reset()
    patterns = small_entry.alignment.patterns()
    deltas, _ = spr_parsimony_deltas(
        env.tree, env.moves, parsimony_tips(patterns.codes), np.asarray(patterns.weights, dtype=np.float64)
    )
    climb = ByParsimony()
    evaluated = []
    original = env.evaluate_moves
    env.evaluate_moves = lambda indices=None: evaluated.append(np.asarray(indices)) or original(indices)
    choice = climb.choose(env)
    top = evaluated[0]
    assert len(top) == max(8, int(np.ceil(0.05 * len(env.moves))))
    assert deltas[top].max() <= np.sort(deltas)[len(top) - 1]  # exactly the lowest parsimony changes
    assert choice is None or choice in np.concatenate(evaluated)
    for bad in ({"top": 1.5}, {"min_top": 0}):
        with pytest.raises(ValueError, match="top"):
            RankedClimb(**bad)


def test_a_certified_climb_escapes_its_optimum_by_optimising_every_branch_of_its_best_moves(real_dir):
    """A move's evaluation optimises only the branches next to it; at the climb's optimum the few best moves
    get every branch optimised, and the climb goes on from one that beats the current tree (a real 7-taxon
    alignment where that happens from this random start)."""
    aln = load_alignment(real_dir / "train" / "TreeBASE_10767.phy")
    entry = EnvAlignment.build(aln, prepare_alignment(aln, "JC"), "TreeBASE_10767")
    env = TreeEnv([entry], EnvConfig(start="random"), seed=0)
    env.reset()
    start = env.tree.copy()
    stuck = Unranked()
    stuck.thorough = 0  # no escape: a plain certified climb
    plain = run_search(env, stuck, steps=None)
    assert env.evaluate_moves().max() <= plain.final_loglik + 1e-6  # an optimum under the step's evaluation
    climb = Unranked()
    assert climb.choose(env) is None
    better = climb.escape(env)
    assert better is not None
    fresh = LikelihoodEngine(aln, parse_model("JC"))
    better_loglik = fresh.optimize_branch_lengths(better.copy(), rounds=20, tol=1e-6)
    assert better_loglik > plain.final_loglik + 1e-3
    # one move away
    assert topology_key(better) in {topology_key(spr_neighbor(env.tree, m)) for m in env.moves}
    assert climb.escape(env) is None  # answered once per certified step
    env.reset(tree=start)
    escaped = run_search(env, Unranked(), steps=None)
    assert escaped.final_loglik >= better_loglik - 1e-3
    assert fresh.loglik(escaped.tree) == pytest.approx(escaped.final_loglik, abs=1e-5)


def test_climbs_search_the_distinct_sequences_and_put_the_copies_back():
    """Identical sequences are searched once (as IQ-TREE does): the answer holds every taxon, each copy next
    to its twin, and its log-likelihood is the full alignment's."""
    from phylorl.env.reduced import without_duplicates
    from phylorl.phylo.alignment import Alignment
    from phylorl.phylo.duplicates import find_duplicates, prune_tree
    from phylorl.phylo.starts import MIN_BRANCH_LENGTH

    base = simulate_dataset(10, 400, np.random.default_rng(5)).alignment
    alignment = Alignment(tuple(base.taxa) + ("copy3", "copy8"), base.codes[[*range(10), 3, 8]])
    entry = EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "copies")
    results = {}
    for distinct in (True, False):
        env = TreeEnv([entry], EnvConfig(start="random"), seed=1)
        env.reset()
        results[distinct] = run_search(
            env, "hillclimb", steps=None, restarts=2, rng=np.random.default_rng(0), distinct=distinct
        )
    answer = results[True].best_tree
    assert answer.taxa == alignment.taxa
    fresh = LikelihoodEngine(alignment, parse_model(entry.prepared.model))
    assert fresh.loglik(answer.copy()) == pytest.approx(results[True].best_loglik, abs=1e-6)
    for dropped, twin in find_duplicates(alignment).twin.items():
        assert answer.lengths[answer.node_edges[dropped, 0]] == MIN_BRANCH_LENGTH
        assert twin in answer.neighbors[answer.neighbors[dropped, 0]]
    assert results[True].best_loglik >= results[False].best_loglik - 0.1
    # the same search by hand, on the reduced alignment
    env = TreeEnv([entry], EnvConfig(start="random"), seed=1)
    env.reset()
    reduced, _ = without_duplicates(env)
    alone = run_search(
        reduced, "hillclimb", steps=None, restarts=2, rng=np.random.default_rng(0), distinct=False
    )
    shift = results[True].best_loglik - alone.best_loglik  # its trajectory, on the full alignment's scale
    assert results[True].trajectory == pytest.approx([value + shift for value in alone.trajectory], abs=1e-9)
    assert results[True].evaluations > alone.evaluations  # and the final scoring on the full alignment
    assert topology_key(prune_tree(answer, find_duplicates(alignment))) == topology_key(
        prune_tree(results[False].best_tree, find_duplicates(alignment))
    )


def test_a_climb_that_comes_back_to_a_topology_stops_there(small_entry):
    """A climb that comes back to a topology it has left without beating it by RETURN_GAIN is going round a
    flat ridge of equivalent trees (1e-5 a pass, thousands of evaluations for nothing): it stops there."""
    from phylorl.env.search import RETURN_GAIN, _returned

    env = TreeEnv([small_entry], EnvConfig(start="random"), seed=1)
    env.reset()
    visited = {}
    assert not _returned(visited, env)  # first visit
    assert _returned(visited, env)  # the same topology, no gain
    env.loglik += 2 * RETURN_GAIN
    assert not _returned(visited, env)  # back with a real gain: the climb goes on
