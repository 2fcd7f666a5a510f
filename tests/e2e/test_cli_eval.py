"""End to end: ``phylorl eval`` (alias ``evaluate``) and ``phylorl search`` with a learner checkpoint.

The corpus is simulated by ``phylorl simulate``; the agent is an untrained learner checkpoint; IQ-TREE
is the real ``iqtree2`` (skipped locally when missing, a failure in CI).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from helpers import phylorl_cli

from phylorl.agent.checkpoints import DEFAULT_CHECKPOINT
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.agent.policy import DEFAULT_TABU, AgentPolicy
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import PreparationCache
from phylorl.env.search import RESCORE, run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.evaluation.metrics import METHODS
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import LikelihoodEngine, load_alignment, parse_model, read_newick

SMALL = NetworkConfig(features="rich", hidden=16, heads=4, action_hidden=16, head_hidden=16)
MODEL = "HKY+G4"  # free parameters: IQ-TREE then gets our estimated ones as a fixed model string


def phylorl_on(setup, words: str, **values):
    """``phylorl`` with ``words`` (split at spaces), then ``--key value`` for each keyword (``_`` as ``-``),
    under :data:`MODEL` and the module's preparation cache."""
    flags = [x for key, value in values.items() for x in (f"--{key.replace('_', '-')}", value)]
    return phylorl_cli(*words.split(), *flags, "--model", MODEL, "--cache-dir", setup["cache"])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    proc = phylorl_cli(
        "simulate", "--out", root / "sim", "--count", 2, "--taxa", "7:8", "--sites", "200:300", "--seed", 1
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoints = root / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    Learner(SMALL, AgentConfig(), seed=1).save(checkpoints / "learner-000000012.pt")
    (checkpoints / "latest").write_text("learner-000000012.pt")
    return {
        "alignments": root / "sim",
        "run": root / "run",
        "checkpoint": checkpoints / "learner-000000012.pt",
        "cache": root / "cache",
    }


def test_eval_compares_every_method_with_iqtree(setup, need, tmp_path):
    need("iqtree2")
    out, plots = tmp_path / "eval.json", tmp_path / "plots"
    proc = phylorl_on(
        setup,
        "eval --starts 2",
        alignments=setup["alignments"],
        checkpoint=setup["checkpoint"],
        json=out,
        plots=plots,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["settings"]["checkpoint"] == str(setup["checkpoint"].resolve())
    assert result["settings"]["starts"] == 2 and result["settings"]["methods"] == list(METHODS)
    assert result["settings"]["tabu"] == DEFAULT_TABU and result["settings"]["rescore"] == RESCORE
    assert sorted(a["n_taxa"] for a in result["alignments"]) == [7, 8]
    for info in result["alignments"]:
        assert info["model"].startswith("HKY{") and "+G4{" in info["model"]
        assert info["steps"] == 2 * info["n_taxa"] and info["iqtree_seconds"] > 0
        # IQ-TREE's tree re-scored by our engine is the reference; it agrees with IQ-TREE's own score
        assert info["iqtree_loglik"] == pytest.approx(info["iqtree_reported_loglik"], abs=0.05)
    rows = result["rows"]
    assert len(rows) == 2 * 2 * len(METHODS)
    for row in rows:
        assert (
            math.isfinite(row["improvement"])
            and row["rf"] is not None
            and row["final_loglik"] >= row["start_loglik"]
        )
        assert row["delta_loglik"] == pytest.approx(row["final_loglik"] - row["start_loglik"])
    starts = {}
    for row in rows:  # every method starts from the same tree
        starts.setdefault((row["alignment"], row["start"]), set()).add(round(row["start_loglik"], 9))
    assert all(len(v) == 1 for v in starts.values()) and len(starts) == 4
    summary = {s["method"]: s for s in result["summary"]}
    assert set(summary) == set(METHODS)
    assert all(
        math.isfinite(s["mean_improvement"]) and math.isfinite(s["mean_best_of_k_improvement"])
        for s in summary.values()
    )
    assert summary["iqtree"]["mean_improvement"] == 1.0
    assert all(r["improvement"] == 1.0 for r in rows if r["method"] == "iqtree")
    assert summary["hillclimb"]["mean_improvement"] >= 0.9 and summary["ml"]["mean_improvement"] >= 0.9
    assert summary["agent+polish"]["mean_improvement"] >= 0.9
    assert set(result["by_taxa"]) == {"7", "8"}
    for name in ("improvement_by_taxa.png", "trajectory.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for word in METHODS + ("improvement", "best of K", "within 0.1", "by taxon count"):
        assert word in proc.stdout
    assert "Traceback" not in proc.stderr


def test_evaluate_alias_without_iqtree_reports_deltas(setup, tmp_path):
    out = tmp_path / "eval.json"
    proc = phylorl_on(
        setup,
        "evaluate --starts 1 --steps 3 --methods agent,random,greedy --no-iqtree --tabu 0 --rescore 0",
        alignments=setup["alignments"] / "sim_0000.fasta",
        checkpoint=setup["run"],
        json=out,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert not result["has_reference"] and result["settings"]["methods"] == ["agent", "random", "greedy"]
    assert result["settings"]["tabu"] == 0 and result["settings"]["rescore"] == 0
    for row in result["rows"]:
        assert row["improvement"] is None and row["iqtree_loglik"] is None and row["rf"] is None
        assert row["steps"] <= 3
    for s in result["summary"]:
        assert s["mean_improvement"] is None and s["seconds_ratio_to_iqtree"] is None
        assert math.isfinite(s["mean_delta_loglik"])
    assert "improvement is undefined" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--checkpoint", "{tmp}/nothing.pt"], "checkpoint '{tmp}/nothing.pt' does not exist"),
        (["--starts", 0], "--starts must be >= 1, got 0"),
        (["--steps", 0], "--steps must be >= 1, got 0"),
        (["--methods", "agent,annealing"], "unknown method(s) 'annealing'"),
        (["--methods", "random,iqtree", "--no-iqtree"], "--methods names iqtree but --no-iqtree is given"),
        (["--model", "GTR+Q"], "GTR+Q"),
    ],
)
def test_eval_errors_are_one_line_before_any_work(setup, tmp_path, args, message):
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    if "--checkpoint" not in args:
        args += ["--checkpoint", str(setup["checkpoint"])]
    cache = tmp_path / "cache"
    proc = phylorl_cli("eval", "--alignments", setup["alignments"], "--cache-dir", cache, *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("phylorl eval: error: "), proc.stderr
    assert message.replace("{tmp}", str(tmp_path)) in lines[0]
    assert not cache.exists()  # nothing was prepared


def test_missing_default_checkpoint_is_one_line(setup, tmp_path, monkeypatch, capsys):
    """Without --checkpoint both commands use the shipped models/agent.pt; when it is missing (here: the
    default pointed at a file that does not exist) each says so in one line, before any preparation."""
    import phylorl.agent.checkpoints
    from phylorl.cli import main

    missing = tmp_path / "models" / "agent.pt"
    monkeypatch.setattr(phylorl.agent.checkpoints, "DEFAULT_CHECKPOINT", missing)
    for command in (
        ["eval", "--alignments", str(setup["alignments"]), "--no-iqtree"],
        ["search", "--alignment", str(setup["alignments"] / "sim_0000.fasta"), "--policy", "agent"],
    ):
        assert main([*command, "--cache-dir", str(tmp_path / "cache")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and f"no agent checkpoint at {missing}" in lines[0], lines
        assert not (tmp_path / "cache").exists()


def test_the_shipped_agent_loads_and_climbs(setup):
    """models/agent.pt is a rich-observation checkpoint whose search, evaluating no move, gains about
    what likelihood-greedy gains (which evaluates every move) and more than random moves."""
    policy = AgentPolicy.from_checkpoint(DEFAULT_CHECKPOINT)
    assert policy.features == "rich"
    aln = load_alignment(setup["alignments"] / "sim_0000.fasta")
    entry = EnvAlignment.build(aln, PreparationCache(setup["cache"]).get(aln, MODEL), "sim")
    gains = {}
    for name, chooser in (("agent", policy), ("random", "random"), ("greedy", "greedy")):
        results = []
        for k in range(4):
            env = TreeEnv([entry], EnvConfig(start="random"), seed=100 + k)
            env.reset()
            result = run_search(env, chooser, steps=2 * aln.n_taxa, rng=np.random.default_rng(k), finish=True)
            results.append(result.best_loglik - result.start_loglik)
        gains[name] = float(np.mean(results))
    assert gains["agent"] >= 0.95 * gains["greedy"] and gains["agent"] > gains["random"] + 10.0, gains


def test_search_with_the_agent_reports_the_best_tree_and_matches_the_in_process_policy(setup, tmp_path):
    alignment = setup["alignments"] / "sim_0001.fasta"
    out = tmp_path / "best.nwk"
    proc = phylorl_on(
        setup,
        "search --policy agent --steps 6 --start random --seed 3 --json",
        alignment=alignment,
        checkpoint=setup["run"],
        out=out,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["policy"] == "agent" and result["steps"] == 6 and not result["polish"]
    assert result["tabu"] == DEFAULT_TABU and result["rescore"] == RESCORE
    aln = load_alignment(alignment)
    entry = EnvAlignment.build(aln, PreparationCache(setup["cache"]).get(aln, MODEL), "sim")
    env = TreeEnv([entry], EnvConfig(start="random", horizon=10**9), seed=3)
    env.reset()
    here = run_search(env, AgentPolicy.from_checkpoint(setup["run"]), steps=6, finish=True)
    assert result["start_loglik"] == pytest.approx(here.start_loglik, abs=1e-6)
    assert result["final_loglik"] == pytest.approx(here.final_loglik, abs=1e-6)
    assert result["best_loglik"] == pytest.approx(here.best_loglik, abs=1e-6)
    assert result["best_loglik"] >= max(result["final_loglik"], result["start_loglik"])
    # the tree written (and in the JSON) is the best one seen
    engine = LikelihoodEngine(aln, parse_model(result["model"]))
    assert out.read_text().strip() == result["tree"]
    assert engine.loglik(read_newick(result["tree"], aln)) == pytest.approx(result["best_loglik"], abs=1e-4)


def test_search_polish_hill_climbs_from_the_best_tree(setup):
    alignment = setup["alignments"] / "sim_0000.fasta"
    common = "search --policy random --steps 5 --start random --seed 4 --json"
    plain = phylorl_on(setup, common, alignment=alignment)
    polished = phylorl_on(setup, common + " --polish", alignment=alignment)
    assert plain.returncode == 0 and polished.returncode == 0, polished.stderr[-3000:]
    plain, polished = json.loads(plain.stdout), json.loads(polished.stdout)
    assert polished["polish"] and polished["search_best_loglik"] == pytest.approx(
        plain["best_loglik"], abs=1e-9
    )
    assert polished["best_loglik"] == pytest.approx(polished["polish_loglik"])
    assert polished["best_loglik"] > plain["best_loglik"] and polished["evaluations"] > plain["evaluations"]
    aln = load_alignment(alignment)
    engine = LikelihoodEngine(aln, parse_model(polished["model"]))
    assert engine.loglik(read_newick(polished["tree"], aln)) == pytest.approx(
        polished["best_loglik"], abs=1e-4
    )


@pytest.mark.parametrize("policy,restarts", [("hillclimb", 0), ("hillclimb", 2)])
def test_search_climbs_and_writes_its_best_tree(setup, tmp_path, policy, restarts):
    alignment, out = setup["alignments"] / "sim_0001.fasta", tmp_path / "best.nwk"
    proc = phylorl_on(
        setup,
        f"search --policy {policy} --restarts {restarts} --start random --seed 1 --json",
        alignment=alignment,
        out=out,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["policy"] == policy and result["best_loglik"] > result["start_loglik"] + 1.0
    aln = load_alignment(alignment)
    engine = LikelihoodEngine(aln, parse_model(result["model"]))
    assert engine.loglik(read_newick(out.read_text(), aln)) == pytest.approx(result["best_loglik"], abs=1e-4)


def test_search_puts_identical_sequences_back_and_says_so(setup, tmp_path):
    from phylorl.phylo.alignment import Alignment, format_fasta

    base = load_alignment(setup["alignments"] / "sim_0001.fasta")
    copies = Alignment(base.taxa + ("copy_of_0", "copy_of_3"), base.codes[[*range(base.n_taxa), 0, 3]])
    path = tmp_path / "copies.fasta"
    path.write_text(format_fasta(copies))
    results = {}
    for flag in ([], ["--keep-identical"]):
        proc = phylorl_on(
            setup,
            " ".join(["search --policy hillclimb --start random --seed 2 --json", *flag]),
            alignment=path,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[bool(flag)] = json.loads(proc.stdout)
        assert ("2 identical sequence(s) searched once" in proc.stderr) == (not flag)
    assert results[False]["identical_dropped"] == 2 and results[True]["identical_dropped"] == 0
    engine = LikelihoodEngine(copies, parse_model(results[False]["model"]))
    tree = read_newick(results[False]["tree"], copies)
    assert tree.taxa == copies.taxa
    assert engine.loglik(tree) == pytest.approx(results[False]["best_loglik"], abs=1e-4)
    assert results[False]["best_loglik"] >= results[True]["best_loglik"] - 0.1


def test_eval_threads_gives_the_same_results_in_the_same_order(setup, tmp_path):
    """--threads 2 evaluates the alignments in two forked processes: same rows, same order, as one thread."""
    rows = {}
    for threads in (1, 2):
        out = tmp_path / f"eval-{threads}.json"
        proc = phylorl_on(
            setup,
            f"eval --starts 2 --methods agent,random,greedy --no-iqtree --threads {threads}",
            alignments=setup["alignments"],
            checkpoint=setup["checkpoint"],
            json=out,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(out.read_text())
        assert result["settings"]["workers"] == threads
        rows[threads] = [
            (r["alignment"], r["start"], r["method"], r["final_loglik"], r["evaluations"], r["tree"])
            for r in result["rows"]
        ]
        plain = [line for line in proc.stderr.splitlines() if re.match(r"eval \d+/\d+ .*: start ", line)]
        assert len(plain) == 2 * 2 * 3  # every unit of progress reported, from the workers too
    assert len(rows[1]) == 2 * 2 * 3
    assert [r[:3] + (r[4], r[5]) for r in rows[2]] == [r[:3] + (r[4], r[5]) for r in rows[1]]
    np.testing.assert_allclose([r[3] for r in rows[2]], [r[3] for r in rows[1]], rtol=0, atol=1e-9)


def test_eval_json_without_a_file_prints_one_object_on_stdout(setup):
    proc = phylorl_on(
        setup,
        "eval --starts 1 --methods agent,random --no-iqtree --json",
        alignments=setup["alignments"],
        checkpoint=setup["checkpoint"],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # nothing else on stdout: the tables went to stderr
    assert len(result["rows"]) == 2 * 2 and "agent" in proc.stderr
