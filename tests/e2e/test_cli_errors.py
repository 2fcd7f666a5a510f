"""Every CLI error path: exit status 2, one line on stderr naming what is wrong, never a traceback;
plus ``--version`` and the ``--json`` of the commands that gained it. Real child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import phylorl_cli

import phylorl

ALIGNMENT = Path(__file__).resolve().parents[2] / "examples" / "DS1.fasta"  # in the repository


def assert_one_line_error(proc: subprocess.CompletedProcess, *expected: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_version():
    proc = phylorl_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"phylorl {phylorl.__version__}"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-errors")
    (d / "foreign.nwk").write_text("((a,b),c);\n")
    (d / "garbage.nwk").write_text("not a tree\n")
    (d / "empty").mkdir()
    (d / "two").mkdir()
    for name in ("a.fasta", "b.fasta"):
        (d / "two" / name).write_bytes(ALIGNMENT.read_bytes())
    return d


CASES = {
    "ml from a random start": (
        ["search", "--alignments", "{a}", "--start", "random"],
        ["--policy ml", "random"],
    ),
    "resume without a checkpoint file": (["search", "--alignments", "{a}", "--resume"], ["--resume"]),
    "resume from a missing checkpoint": (
        ["search", "--alignments", "{a}", "--resume", "--checkpoint-file", "{d}/nothere.json"],
        ["nothere.json"],
    ),
    "ml with an agent flag": (["search", "--alignments", "{a}", "--tabu", "3"], ["--tabu", "--policy ml"]),
    "zero ml starts": (["search", "--alignments", "{a}", "--starts", "0"], ["--starts"]),
    "zero ml threads": (["search", "--alignments", "{a}", "--threads", "0"], ["--threads"]),
    "threads without ml": (
        ["search", "--alignments", "{a}", "--policy", "random", "--threads", "2"],
        ["--threads", "--policy ml"],
    ),
    "random start with ml": (
        ["search", "--alignments", "{a}", "--start", "random"],
        ["--policy ml", "not random"],
    ),
    "missing alignment": (["search", "--alignments", "{d}/nothere.fa", "--policy", "random"], ["nothere.fa"]),
    "directory of two for search": (
        ["search", "--alignments", "{d}/two", "--policy", "random"],
        ["takes one alignment", "names 2"],
    ),
    "negative radius": (
        ["search", "--alignments", "{a}", "--policy", "random", "--radius", "-3"],
        ["--radius"],
    ),
    "restarts without hillclimb": (
        ["search", "--alignments", "{a}", "--policy", "random", "--restarts", "2"],
        ["--restarts"],
    ),
    "tabu without the agent": (
        ["search", "--alignments", "{a}", "--policy", "random", "--tabu", "5"],
        ["--tabu"],
    ),
    "negative tabu for eval": (
        ["eval", "--alignments", "{a}", "--tabu", "-1", "--no-iqtree"],
        ["--tabu", "-1"],
    ),
    "negative rescore for search": (
        ["search", "--alignments", "{a}", "--policy", "random", "--rescore", "-2"],
        ["--rescore", "-2"],
    ),
    "rescore for a climb": (
        ["search", "--alignments", "{a}", "--policy", "hillclimb", "--rescore", "8"],
        ["--rescore", "climb"],
    ),
    "negative rescore for eval": (
        ["eval", "--alignments", "{a}", "--rescore", "-1", "--no-iqtree"],
        ["--rescore", "-1"],
    ),
    "bad model": (["search", "--alignments", "{a}", "--policy", "random", "--model", "XYZ+Q"], ["XYZ"]),
    "missing checkpoint": (
        ["search", "--alignments", "{a}", "--policy", "agent", "--checkpoint", "{d}/none.pt"],
        ["none.pt"],
    ),
    "tree file that is not a checkpoint": (
        ["eval", "--alignments", "{a}", "--checkpoint", "{d}/foreign.nwk", "--starts", "1", "--no-iqtree"],
        ["foreign.nwk", "not a learner checkpoint"],
    ),
    "unparsable tree": (["loglik", "--alignments", "{a}", "--tree", "{d}/garbage.nwk"], ["garbage.nwk"]),
    "tree of other taxa": (
        ["loglik", "--alignments", "{a}", "--tree", "{d}/foreign.nwk"],
        ["foreign.nwk", "taxa differ"],
    ),
    "empty corpus for train": (
        ["train", "--alignments", "{d}/empty", "--updates", "1"],
        ["empty", "no alignment"],
    ),
    "simulate bad range": (["simulate", "--out", "{d}/sim", "--count", "1", "--taxa", "9:5"], ["--taxa"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_errors_are_one_line_with_status_2(case, files):
    args, expected = CASES[case]
    args = [a.format(d=files, a=ALIGNMENT) for a in args]
    assert_one_line_error(phylorl_cli(*args), *expected)


def test_train_without_redis_server_is_one_line_before_any_work(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)  # a PATH with python and nothing else
    env = {**os.environ, "PATH": str(bin_dir)}
    proc = phylorl_cli("train", "--updates", "1", "--run-dir", tmp_path / "run", env=env)
    assert_one_line_error(proc, "redis-server is not installed")
    assert not (tmp_path / "run").exists()  # nothing was simulated or started


def test_simulate_prints_json(tmp_path):
    proc = phylorl_cli(
        "simulate", "--out", tmp_path / "sim", "--count", "2", "--taxa", "5", "--sites", "50", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    assert [d["name"] for d in manifest["datasets"]] == ["sim_0000", "sim_0001"]
    assert manifest["manifest"] == str(tmp_path / "sim" / "manifest.json")


def test_train_prometheus_port_in_use_is_one_line_and_stops_the_run(tmp_path, need):
    import socket

    need("redis-server")
    need("prometheus")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = tmp_path / "tiny.yaml"
        config.write_text("model: JC\nsimulate_count: 2\nsimulate_taxa: '6:6'\nsimulate_sites: '100:100'\n")
        proc = phylorl_cli(
            "train",
            "--config",
            config,
            "--updates",
            "5",
            "--run-dir",
            tmp_path / "run",
            "--no-report",
            "--prometheus",
            port,
        )
    # the run had started (its banner and progress are on stderr): the error is its last line, and the only
    # one
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and proc.stderr.rstrip().splitlines()[-1] == errors[0]
    assert "prometheus exited" in errors[0] and "prometheus.log" in errors[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["reason"] == "failed to start" and "prometheus" in summary["error"]
    assert all(code is not None for code in summary["exit_codes"].values())  # every service was stopped


@pytest.mark.parametrize(
    "service, flags, expected",
    [
        ("actor", ["--alignments", "x", "--pipeline", "0"], "pipeline must be >= 1, got 0"),
        ("learner", ["--inference-queue", "0"], "inference_max_batch and inference_queue must be >= 1"),
        ("learner", ["--config", "/nonexistent/learner.yaml"], "/nonexistent/learner.yaml"),
        ("replay", ["--capacity", "0"], "capacity must be >= 1, got 0"),
    ],
)
def test_a_service_started_with_a_bad_config_says_so_in_one_line(service, flags, expected):
    proc = subprocess.run(
        [sys.executable, "-m", f"services.{service}", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert_one_line_error(proc, f"python -m services.{service}: error:", expected)


def test_an_actor_with_a_missing_corpus_ends_with_that_error_not_a_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.actor",
            "--alignments",
            str(tmp_path / "none"),
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # after its logged config, one error line
    assert (
        proc.stderr.strip().splitlines()[-1]
        == f"python -m services.actor: error: corpus path '{tmp_path / 'none'}' does not exist"
    )
