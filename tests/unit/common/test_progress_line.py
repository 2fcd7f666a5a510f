"""``phylorl train``'s progress line written to a file or pipe (``services/launcher/display.py``)."""

from __future__ import annotations

import io
from dataclasses import asdict

from rich.console import Console

from services.launcher.display import LOG_EVERY_S, ProgressLine
from services.launcher.progress import Snapshot


def record(time_s: float, updates: float, env_steps: float) -> dict:
    """A progress record as ``run_local`` makes it, with the last second's rates (here: 1 update/s, 5
    steps/s)."""
    snapshot = Snapshot(
        time_s, updates=updates, update_seconds_sum=0.05 * updates, env_steps=env_steps, actors=2
    )
    return {
        **asdict(snapshot),
        "updates_per_s": 1.0,
        "env_steps_per_s": 5.0,
        "mean_update_ms": 50.0,
        "mean_episode_delta_loglik": float("nan"),
        "actor_inference_wait_fraction": 0.0,
    }


def test_on_a_file_a_line_every_interval_with_the_rates_over_it_and_partial_stages_thinned():
    out = io.StringIO()
    console = Console(file=out, width=60)  # not a terminal: no live redraw, and no wrapping of the long lines
    assert not console.is_terminal
    with ProgressLine(console, "preparing the corpus ...") as line:
        line.stage("preparing: 1/3", partial=True)  # within the interval of the first line: not printed
        line.stage("preparing: 3/3")
        line.stage("starting")
        line.show(record(1.0, 0, 0))
        line.show(record(1.0 + LOG_EVERY_S / 2, 10, 50))  # within the interval: not printed
        line.show(record(1.0 + 2 * LOG_EVERY_S, 80, 400))
        line.end("totals")
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["preparing the corpus ...", "preparing: 3/3", "starting"]
    assert len(lines) == 6 and lines[-1] == "totals"
    assert "updates 0 (1.00/s" in lines[3]  # the first record: its own last second
    assert "episode ΔlogL –" in lines[3] and "nan" not in out.getvalue()  # no episode ended yet
    # the third record over the 2 intervals since the first: 80 updates and 400 steps in 20 s
    assert f"updates 80 ({80 / (2 * LOG_EVERY_S):.2f}/s, 50 ms)" in lines[4]
    assert f"env steps 400 ({400 / (2 * LOG_EVERY_S):.1f}/s" in lines[4]
