"""The large-scale search: rounds that never lose likelihood and report the tree's true log-likelihood, the
same answer for the same seed, a resumed search equal to an uninterrupted one, identical sequences put back,
and IQ-TREE's tree reached on a benchmark alignment."""

import json
from dataclasses import replace

import numpy as np
import pytest

from phylorl.phylo import (
    LikelihoodEngine,
    apply_spr,
    enumerate_moves,
    load_alignment,
    parse_model,
    random_tree,
    read_newick,
    write_newick,
)
from phylorl.phylo.alignment import Alignment
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from phylorl.phylo.splits import splits
from phylorl.phylo.spr import perturb
from phylorl.search import SearchConfig, search
from phylorl.search.perturb import climb
from phylorl.search.rounds import optimise_near, spr_round
from phylorl.search.state import read_checkpoint
from phylorl.search.workers import Workers

MODEL = "GTR{1.2,3.1,0.8,1.1,4.0}+F{0.3,0.2,0.2,0.3}+G4{0.6}"


@pytest.fixture(scope="module")
def simulated():
    return simulate_dataset(24, 500, dataset_rng(11, 0), model=parse_model(MODEL)).alignment


@pytest.mark.parametrize("branches", [0, 1, 3])
def test_a_round_never_loses_and_reports_the_trees_loglik(simulated, branches):
    engine = LikelihoodEngine(simulated, MODEL)
    tree = random_tree(simulated.taxa, np.random.default_rng(0))
    start = engine.optimize_branch_lengths(tree, rounds=3)
    result = spr_round(engine, tree, start, 4, branches=branches)
    tree.validate()
    assert result.moves > 0 and result.loglik > start
    assert 1 <= result.farthest <= 4
    fresh = LikelihoodEngine(simulated, MODEL)
    assert fresh.loglik(tree) == pytest.approx(result.loglik, abs=1e-6)


def test_a_fast_round_undoes_every_nni_away_from_the_optimum():
    """Each NNI topology is the result of four moves leaving different branch lengths; a round scores all
    four, so it finds the way back even where the canonical move's lazy score is far below the tree."""
    data = simulate_dataset(24, 500, dataset_rng(11, 0), model=parse_model(MODEL))
    engine = LikelihoodEngine(data.alignment, MODEL)
    best = engine.optimize_branch_lengths(data.tree, rounds=20, tol=1e-6)
    checked = 0
    for move in enumerate_moves(data.tree, radius=1):
        tree = data.tree.copy()
        apply_spr(tree, move)
        loglik = engine.optimize_branch_lengths(tree, rounds=20, tol=1e-6)
        if loglik > best - 1.0:
            continue
        checked += 1
        assert spr_round(engine, tree, loglik, 1).loglik > best - 1.0, tuple(move.tolist())
    assert checked >= 20


def test_same_seed_same_answer_and_resume_equals_uninterrupted(simulated, tmp_path):
    config = SearchConfig(starts=2)
    progress, saved = [], []
    whole = search(
        simulated,
        MODEL,
        config=config,
        seed=4,
        on_progress=progress.append,
        checkpoint=lambda data: saved.append(json.loads(json.dumps(data))),
    )
    again = search(simulated, MODEL, config=config, seed=4)
    assert write_newick(whole.tree) == write_newick(again.tree) and whole.loglik == again.loglik
    assert whole.rounds == len(progress) == len(saved) >= 4
    assert [p["round"] for p in progress] == list(range(1, whole.rounds + 1))
    assert all(b["best_loglik"] >= a["best_loglik"] - 1e-6 for a, b in zip(progress, progress[1:]))
    assert {p["start"] for p in progress} == {0, 1}
    for k in (1, whole.rounds // 2):  # from a checkpoint file, and from a dict
        path = tmp_path / f"round{k}.json"
        path.write_text(json.dumps(saved[k - 1]))
        resumed = search(simulated, MODEL, config=config, seed=4, resume=path if k == 1 else saved[k - 1])
        assert write_newick(resumed.tree) == write_newick(whole.tree) and resumed.loglik == whole.loglik
        assert resumed.rounds == whole.rounds and resumed.moves == whole.moves
    with pytest.raises(ValueError, match="seed"):
        search(simulated, MODEL, config=config, seed=5, resume=saved[0])
    assert read_checkpoint(saved[-1])["state"]["phase"] == "done"


def test_identical_sequences_are_searched_once_and_put_back(simulated):
    codes = np.concatenate([simulated.codes, simulated.codes[[2, 2, 7]]])
    taxa = tuple(simulated.taxa) + ("copy_a", "copy_b", "copy_c")
    alignment = Alignment(taxa, codes, "with copies")
    result = search(alignment, MODEL, seed=1)
    assert result.dropped == 3 and result.tree.taxa == taxa
    result.tree.validate()
    assert LikelihoodEngine(alignment, MODEL).loglik(result.tree) == pytest.approx(result.loglik, abs=1e-4)
    found = splits(result.tree)  # each copy next to its twin: the clades {2, 24, 25} and {7, 26}
    assert (1 << 2 | 1 << 24 | 1 << 25) in found and (1 << 7 | 1 << 26) in found


def test_free_parameters_are_fitted_first_and_each_step_is_reported(simulated):
    steps = []
    result = search(simulated, "HKY+G4", seed=0, on_prepare=steps.append)
    spec = parse_model(result.model)
    assert not spec.free_parameters and spec.kind == "HKY"
    names = [s["step"] for s in steps]
    assert names[0] == "nj" and names[-1] == "start" and set(names[1:-1]) == {"model"}
    fit = steps[1:-1]
    assert [s["round"] for s in fit] == list(range(len(fit))) and len(fit) >= 2
    assert fit[-1]["loglik"] > fit[0]["loglik"]  # the fitted parameters beat the starting ones
    assert steps[-1]["loglik"] == result.start_loglik
    elapsed = [s["elapsed"] for s in steps]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= result.prepare_seconds


def test_reaches_iqtree_on_ds1(ds_reference):
    ref = ds_reference("DS1", "GTR_G4")
    alignment = load_alignment(ref["alignment"])
    result = search(alignment, ref["model"], seed=1)
    engine = LikelihoodEngine(alignment, ref["model"])
    iqtree = engine.optimize_branch_lengths(read_newick(ref["tree"], alignment), rounds=20, tol=1e-4)
    assert result.loglik >= iqtree - 0.1
    assert splits(result.tree) == splits(read_newick(ref["tree"], alignment)) or result.loglik > iqtree + 0.1


def test_a_checkpoint_file_is_rewritten_every_round_and_resumes(simulated, tmp_path):
    config = SearchConfig(starts=2, max_rounds=5)
    path = tmp_path / "run" / "checkpoint.json"
    rounds = []
    first = search(
        simulated,
        MODEL,
        config=config,
        seed=2,
        checkpoint=path,
        on_progress=lambda d: rounds.append(
            json.loads(path.read_text())["state"]["round"] if path.exists() else 0
        ),
    )
    assert first.rounds == 5 and rounds == [0, 1, 2, 3, 4]  # written after each round's progress call
    assert json.loads(path.read_text())["state"]["round"] == 5
    finished = search(simulated, MODEL, config=SearchConfig(starts=2), seed=2)
    with pytest.raises(ValueError, match="config"):  # max_rounds is part of the config it is tied to
        search(simulated, MODEL, config=SearchConfig(starts=2), seed=2, resume=path)
    data = json.loads(path.read_text())
    data["config"] = SearchConfig(starts=2).to_dict()
    steps = []
    resumed = search(
        simulated, MODEL, config=SearchConfig(starts=2), seed=2, resume=data, on_prepare=steps.append
    )
    assert steps == []  # a resumed search prepares nothing
    assert write_newick(resumed.tree) == write_newick(finished.tree) and resumed.loglik == finished.loglik


def test_perturbations_end_after_the_failures_the_tree_size_allows(simulated):
    config = SearchConfig(starts=1, perturb_fails=2, perturb_fails_max=6)
    assert [config.fails_allowed(n) for n in (4, 20, 21, 35, 42, 1000)] == [2, 2, 3, 5, 6, 6]
    assert SearchConfig(perturb_fails=0).fails_allowed(1000) == 0
    saved = []
    search(simulated, MODEL, config=config, seed=3, checkpoint=lambda data: saved.append(data["state"]))
    assert simulated.n_taxa == 24 and max(s["fails"] for s in saved) == config.fails_allowed(24) == 3
    assert saved[-1]["phase"] == "done"
    with pytest.raises(ValueError, match="perturb_fails_max"):
        SearchConfig(perturb_fails=5, perturb_fails_max=4)


def test_a_climb_stops_its_fast_and_its_slow_rounds_at_the_gains_it_is_given(simulated):
    engine = LikelihoodEngine(simulated, MODEL)
    tree = random_tree(simulated.taxa, np.random.default_rng(5))
    engine.optimize_branch_lengths(tree, rounds=3)
    config = SearchConfig(
        perturb_radius=3, slow_branches=3, slow_near=1.0, climb_rounds=10, subtree_cutoff=1.0, branch_rounds=2
    )
    once = climb(
        engine, tree, np.random.default_rng(7), 6, 4, replace(config, fast_gain=np.inf, slow_gain=np.inf)
    )
    by_hand = tree.copy()  # one fast round, one slow round
    loglik = optimise_near(engine, by_hand, perturb(by_hand, 6, 3, np.random.default_rng(7)))
    fast = spr_round(engine, by_hand, loglik, 4, branches=0, cutoff=1.0)
    slow = spr_round(engine, by_hand, fast.loglik, 4, branches=3, near=1.0, cutoff=1.0)
    loglik = engine.optimize_branch_lengths(by_hand, np.arange(by_hand.n_edges), rounds=2, tol=1e-3)
    assert write_newick(once.tree) == write_newick(by_hand) and once.loglik == pytest.approx(loglik, abs=1e-6)
    assert once.moves == fast.moves + slow.moves > 0
    until_still = climb(
        engine, tree, np.random.default_rng(7), 6, 4, replace(config, fast_gain=0.0, slow_gain=0.0)
    )
    assert until_still.moves > once.moves  # further rounds while any moved


def test_worker_processes_climb_as_this_process_does(simulated):
    engine = LikelihoodEngine(simulated, MODEL)
    tree = random_tree(simulated.taxa, np.random.default_rng(5))
    engine.optimize_branch_lengths(tree, rounds=3)
    config = SearchConfig(
        perturb_radius=3, slow_branches=3, slow_near=1.0, climb_rounds=3, subtree_cutoff=1.0, branch_rounds=2
    )  # fast_gain=1.0, slow_gain=0.1 by default
    settings = dict(moves=4, climb_radius=4, config=config)

    def jobs():
        return [(tree, np.random.default_rng([7, k])) for k in range(3)]

    here = list(Workers(engine, MODEL, 1).map(climb, jobs(), **settings))
    workers = Workers(LikelihoodEngine(simulated, MODEL), MODEL, 2)
    try:
        there = list(workers.map(climb, jobs(), **settings))
    finally:
        workers.close()
    assert [write_newick(c.tree) for c in here] == [write_newick(c.tree) for c in there]
    assert [(c.loglik, c.moves, c.scored) for c in here] == [(c.loglik, c.moves, c.scored) for c in there]
    assert len({write_newick(c.tree) for c in here}) > 1  # the seeds differ


def test_threads_climb_the_starts_at_once_to_the_same_state_and_resume(simulated):
    def first_slow(threads):
        saved, progress = [], []
        result = search(
            simulated,
            MODEL,
            config=SearchConfig(starts=3, threads=threads),
            seed=6,
            on_progress=progress.append,
            checkpoint=lambda data: saved.append(json.loads(json.dumps(data))),
        )
        return result, saved, next(s for s in saved if s["state"]["phase"] == "slow"), progress

    one = first_slow(1)[2]
    whole, saved, two, progress = first_slow(2)
    assert two is saved[0]  # one step for every start, reported as each is taken in
    assert [(p["phase"], p["start"]) for p in progress[:3]] == [("fast", 0), ("fast", 1), ("slow", 2)]
    same = ("tree", "loglik", "round", "moves", "scored", "best_radius", "start", "radius_min", "radius_max")
    assert {k: two["state"][k] for k in same} == {k: one["state"][k] for k in same}
    iterations = [s["state"]["iteration"] for s in saved if s["state"]["iteration"]]
    assert iterations and all(i % 2 == 0 for i in iterations)  # perturbation rounds are batches of two
    batch = next(
        k for k, s in enumerate(saved) if s["state"]["phase"] == "perturb" and s["state"]["iteration"]
    )
    resumed = search(simulated, MODEL, config=SearchConfig(starts=3, threads=2), seed=6, resume=saved[batch])
    assert write_newick(resumed.tree) == write_newick(whole.tree) and resumed.loglik == whole.loglik
    with pytest.raises(ValueError, match="config"):
        search(simulated, MODEL, config=SearchConfig(starts=3), seed=6, resume=saved[batch])
