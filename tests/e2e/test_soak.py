"""A short soak (tests/e2e/soak.py): ``phylorl train`` under kill -9 of the replay service, an actor and the
learner, a Redis restart and stalled links; every transition the actors made is stored exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_soak_with_faults_loses_and_duplicates_nothing(tmp_path, need):
    need("redis-server")
    report_path = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "e2e" / "soak.py"),
            "--minutes",
            "8",
            "--faults",
            "7",
            "--fault-every",
            "5",
            "--stall-s",
            "5",
            "--quiet-s",
            "40",
            "--run-dir",
            str(tmp_path / "run"),
            "--json",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=840,
    )
    report = json.loads(report_path.read_text())
    print(json.dumps({k: report[k] for k in ("transitions", "restarts", "inference")}, indent=1))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    counts = report["transitions"]
    assert counts["produced"] > 100 and counts["stored"] == counts["produced"]
    assert counts["lost"] == 0 and counts["duplicated"] == 0 and counts["waiting_in_journals"] == 0
    assert counts["stored_but_not_produced"] == 0 and counts["without_origin"] == 0
    kinds = [f["kind"] for f in report["faults"]["schedule"]]
    killed = {f"kill-{service}" for service in ("replay", "actor", "learner", "redis")}
    assert set(kinds) == killed | {"restart-redis", "stall-replay", "stall-redis"}
    assert report["faults"]["survived"] == report["faults"]["injected"] == len(kinds)
    assert report["restarts"].get("replay", 0) >= 1 and report["restarts"].get("learner", 0) >= 1
    assert (
        report["restarts"].get("redis", 0) >= 2
        and sum(v for k, v in report["restarts"].items() if k.startswith("actor")) >= 1
    )
    assert report["reason"] == "interrupted" and report["exit_status"] == 0
    assert report["inference"]["answered"] > 0
