"""End to end: ``phylorl train`` runs redis, replay, learner and actors as real processes."""

from __future__ import annotations

import json
import subprocess
import sys



def test_train_runs_the_whole_system(tmp_path, need):
    need("redis-server")
    run_dir = tmp_path / "run"
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "model: JC\nhorizon: 5\nbatch_size: 16\nhidden: 32\nmin_replay: 48\npublish_every: 5\n"
        "simulate_count: 3\nsimulate_taxa: '6:7'\nsimulate_sites: '200:300'\n"
        "learner: {checkpoint_every: 10}\nactor: {send_batch: 4}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "phylorl.cli", "train", "--config", str(config), "--actors", "2", "--updates", "20",
         "--minutes", "8", "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reason"] == "updates done"
    assert summary["weights_version"] >= 20
    assert all(code == 0 for code in summary["exit_codes"].values()), summary["exit_codes"]
    # actors were answered by newer weights than the initial version 0
    series = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert max(r["actor_weights_version"] for r in series) >= 5
    assert max(r["env_steps"] for r in series) > 0 and max(r["replay_size"] for r in series) >= 48
    assert (run_dir / "checkpoints" / "latest").exists()
    for name in ("redis", "replay", "learner", "actor-0", "actor-1"):
        assert (run_dir / "logs" / f"{name}.log").stat().st_size > 0
    for png in ("learning_curve.png", "update_latency.png", "throughput.png"):
        assert (run_dir / "report" / png).read_bytes()[:4] == b"\x89PNG"
    rows = (run_dir / "learner" / "updates.csv").read_text().splitlines()
    assert len(rows) == 21  # header + one row per update
