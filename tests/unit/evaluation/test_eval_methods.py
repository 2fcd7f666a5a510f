"""evaluate_methods on real components: the engine, the searches, a real policy object and IQ-TREE 2."""

from __future__ import annotations

import math

import numpy as np
import pytest

from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.evaluation.iqtree import IqtreeRunner
from phylorl.evaluation.methods import check_methods, evaluate_methods
from phylorl.evaluation.metrics import METHODS
from phylorl.phylo import LikelihoodEngine, parse_model, read_newick
from phylorl.phylo.simulate import dataset_rng, simulate_dataset


class FirstMove:
    """A (deliberately poor) policy: always the first move. Any object with ``choose(env)`` will do."""

    def choose(self, env):
        return 0 if len(env.moves) else None


@pytest.fixture(scope="module")
def entries():
    out = []
    for i, taxa in enumerate((6, 7)):
        data = simulate_dataset(taxa, 250, dataset_rng(31, i))
        out.append(EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "HKY+G4"), f"sim{i}"))
    return out


def test_every_method_starts_from_the_same_trees_without_iqtree(entries):
    evaluation = evaluate_methods(entries, FirstMove(), starts=2, steps=4, seed=5)
    methods = [m for m in METHODS if m != "iqtree"]
    assert evaluation.settings["methods"] == methods and not evaluation.has_reference
    assert len(evaluation.rows) == 2 * 2 * len(methods)
    for entry in entries:
        for k in range(2):
            env = TreeEnv([entry], EnvConfig(start="random"), seed=5 + k)
            env.reset(0)
            mine = [r for r in evaluation.rows if r.alignment == entry.name and r.start == k]
            assert {r.method for r in mine} == set(methods)
            for r in mine:
                assert r.start_loglik == pytest.approx(env.loglik, abs=1e-9)  # same start for every method
                assert r.improvement is None and r.rf is None and r.within_tolerance is None
                assert r.final_loglik >= r.start_loglik  # the best tree seen includes the start
                # the reported tree scores what the row says
                fresh = LikelihoodEngine(entry.alignment, parse_model(entry.prepared.model))
                assert fresh.loglik(read_newick(r.tree, entry.alignment)) == pytest.approx(
                    r.final_loglik, abs=1e-3
                )
            by = {r.method: r for r in mine}
            assert by["agent"].steps == 4 and by["random"].steps == 4 and by["greedy"].steps <= 4
            assert by["agent+polish"].final_loglik >= by["agent"].final_loglik - 1e-6
            assert by["agent+polish"].evaluations > by["agent"].evaluations
    assert [s.method for s in evaluation.summary] == methods
    assert all(s.mean_improvement is None for s in evaluation.summary)
    assert set(evaluation.by_taxa) == {6, 7}


def test_default_steps_are_twice_the_taxa_and_methods_are_checked(entries):
    evaluation = evaluate_methods(entries[:1], FirstMove(), starts=1, methods=["agent", "random"])
    assert [a.steps for a in evaluation.alignments] == [12]
    assert all(r.steps == 12 for r in evaluation.rows)
    with pytest.raises(ValueError, match="unknown method"):
        evaluate_methods(entries, FirstMove(), starts=1, methods=["agent", "annealing"])
    with pytest.raises(ValueError, match="need a policy"):
        evaluate_methods(entries, None, starts=1, methods=["agent+polish"])
    with pytest.raises(ValueError, match="needs IQ-TREE"):
        check_methods(["iqtree"], has_policy=True, has_iqtree=False)
    with pytest.raises(ValueError, match="starts"):
        evaluate_methods(entries, FirstMove(), starts=0)
    # without a policy the default is every method that needs none
    evaluation = evaluate_methods(entries[:1], None, starts=1, steps=2)
    assert evaluation.settings["methods"] == ["ml", "random", "greedy", "hillclimb"]


def test_scores_against_iqtree(entries, need):
    runner = IqtreeRunner(need("iqtree2"), seed=1)
    evaluation = evaluate_methods(entries, FirstMove(), starts=2, seed=2, iqtree=runner)
    assert evaluation.has_reference and evaluation.settings["methods"] == list(METHODS)
    for info in evaluation.alignments:
        # our engine's score of IQ-TREE's tree agrees with IQ-TREE's own (same fixed model)
        assert info.iqtree_loglik == pytest.approx(info.iqtree_reported_loglik, abs=0.05)
        assert info.iqtree_seconds > 0
    for r in evaluation.rows:
        assert math.isfinite(r.improvement) and 0 <= r.rf_normalised <= 1
        if r.method == "iqtree":
            assert r.improvement == 1.0 and r.rf == 0 and r.within_tolerance
    summary = {s.method: s for s in evaluation.summary}
    assert summary["iqtree"].mean_improvement == 1.0
    assert summary["iqtree"].seconds_ratio_to_iqtree == pytest.approx(1.0)
    assert summary["iqtree"].mean_rf_normalised == 0.0
    assert summary["hillclimb"].mean_improvement >= 0.9
    assert summary["agent+polish"].mean_improvement >= 0.9
    assert summary["greedy"].mean_improvement >= summary["random"].mean_improvement
    for s in summary.values():
        assert 0.0 <= s.fraction_within_tolerance <= 1.0
    assert np.isclose(
        summary["hillclimb"].mean_best_of_k_improvement,
        np.mean(
            [
                max(
                    r.improvement
                    for r in evaluation.rows
                    if r.method == "hillclimb" and r.alignment == e.name
                )
                for e in entries
            ]
        ),
    )
