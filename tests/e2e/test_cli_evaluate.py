"""End to end: ``phylorl search --policy agent`` and ``phylorl evaluate`` with a learner checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from phylorl.agent.learner import Learner
from phylorl.agent.policy import AgentPolicy
from phylorl.env import EnvAlignment, EnvConfig, PreparationCache, TreeEnv
from phylorl.env.search import run_search
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import format_fasta
from phylorl.phylo.simulate import dataset_rng, simulate_dataset

SMALL = NetworkConfig(hidden=16, heads=4, action_hidden=16, head_hidden=16)
MODEL = "HKY+G4"  # free parameters: IQ-TREE then gets our estimated ones as a fixed model string


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    alignments = root / "alignments"
    alignments.mkdir()
    for i, taxa in enumerate((6, 7)):
        data = simulate_dataset(taxa, 200, dataset_rng(21, i))
        (alignments / f"sim{i}.fasta").write_text(format_fasta(data.alignment))
    checkpoints = root / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    Learner(SMALL, seed=1).save(checkpoints / "learner-000000012.pt")
    (checkpoints / "latest").write_text("learner-000000012.pt")
    return {"alignments": alignments, "run": root / "run", "cache": root / "cache"}


def phylorl(*args):
    return subprocess.run([sys.executable, "-m", "phylorl.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_search_with_the_agent_policy_matches_the_in_process_policy(setup):
    alignment = setup["alignments"] / "sim1.fasta"
    proc = phylorl("search", "--alignment", alignment, "--model", MODEL, "--policy", "agent", "--checkpoint",
                   setup["run"], "--steps", 4, "--start", "nj", "--cache-dir", setup["cache"], "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["policy"] == "agent" and result["steps"] == 4
    # the same search in this process (the preparation comes from the cache the CLI filled)
    from phylorl.phylo import load_alignment

    aln = load_alignment(alignment)
    entry = EnvAlignment.build(aln, PreparationCache(setup["cache"]).get(aln, MODEL), "sim1")
    env = TreeEnv([entry], EnvConfig(start="nj", horizon=10**9), seed=0)
    env.reset()
    here = run_search(env, AgentPolicy.from_checkpoint(setup["run"]), steps=4)
    assert result["start_loglik"] == pytest.approx(here.start_loglik, abs=1e-6)
    assert result["final_loglik"] == pytest.approx(here.final_loglik, abs=1e-6)


def test_evaluate_reports_every_policy_and_iqtree(setup, need):
    need("iqtree2")
    proc = phylorl("evaluate", "--checkpoint", setup["run"], "--alignments", setup["alignments"], "--model", MODEL,
                   "--episodes", 3, "--steps", 3, "--iqtree", "--cache-dir", setup["cache"], "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert [r["n_taxa"] for r in summary["alignments"]] == [6, 7]
    for row in summary["alignments"]:
        assert row["model"].startswith("HKY{") and "+G4{" in row["model"]
        policies = row["policies"]
        assert set(policies) == {"agent", "random", "greedy"}
        for values in policies.values():
            assert len(values["delta_loglik"]) == 3
            assert values["mean_delta_loglik"] == pytest.approx(np.mean(values["delta_loglik"]))
        assert min(policies["greedy"]["delta_loglik"]) >= 0.0  # greedy only takes improving moves
        # IQ-TREE's ML search (all branch lengths optimised) is at least as good as 3 greedy moves
        assert row["iqtree_loglik"] >= policies["greedy"]["best_final_loglik"] - 0.01
        assert row["iqtree_loglik"] < 0


def test_evaluate_prints_a_table(setup):
    proc = phylorl("evaluate", "--checkpoint", setup["run"] / "checkpoints" / "learner-000000012.pt",
                   "--alignments", setup["alignments"] / "sim0.fasta", "--model", MODEL, "--episodes", 2,
                   "--steps", 2, "--cache-dir", setup["cache"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for word in ("sim0.fasta", "agent", "random", "greedy", "mean ΔlogL"):
        assert word in proc.stdout


def test_evaluate_errors_are_one_line(setup, tmp_path):
    proc = phylorl("evaluate", "--checkpoint", tmp_path / "nothing.pt", "--alignments", setup["alignments"])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"phylorl evaluate: error: checkpoint '{tmp_path / 'nothing.pt'}' "
                                                "does not exist"]
    proc = phylorl("evaluate", "--checkpoint", setup["run"], "--alignments", tmp_path / "none.fasta")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "does not exist" in proc.stderr
