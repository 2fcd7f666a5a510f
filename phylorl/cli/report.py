"""Write PNG plots of a training run from the run directory's own data.

Reads ``metrics.jsonl`` (written every second by ``phylorl train``) and ``learner/updates.csv``
(one row per learner update) and writes, into ``RUN_DIR/report/``:

- ``learning_curve.png``: mean episode ΔlogL per interval and the learner's Q-loss, against time;
- ``update_latency.png``: distribution of update latency with p50/p95/p99 marked;
- ``throughput.png``: learner updates/s and environment steps/s against time.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

HELP = "PNG plots (learning curve, update latency, throughput) of a run directory"


def add_arguments(p) -> None:
    p.add_argument("run_dir", help="a run directory written by phylorl train")
    p.add_argument("--json", action="store_true", help="print one JSON object naming the plots written")


def run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    run_dir = Path(args.run_dir)
    metrics_path = run_dir / "metrics.jsonl"
    if not metrics_path.exists():
        raise ValueError(f"{run_dir} has no metrics.jsonl: not a phylorl train run directory")
    series = []
    for number, line in enumerate(metrics_path.read_text().splitlines(), 1):
        if line.strip():
            try:
                series.append(json.loads(line))
            except ValueError as exc:
                raise ValueError(f"{metrics_path}:{number}: not JSON ({exc})") from None
    updates, updates_csv = [], run_dir / "learner" / "updates.csv"
    if updates_csv.exists():
        with open(updates_csv, newline="") as fh:
            updates = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    t = np.array([r["time_s"] for r in series])

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)

    fig, ax = plt.subplots(2, 1, figsize=(8, 6))
    delta = np.array([r.get("mean_episode_delta_loglik", math.nan) for r in series], dtype=float)
    ok = np.isfinite(delta)
    ax[0].plot(t[ok], delta[ok], ".", alpha=0.4, label="per interval")
    if ok.sum() >= 5:
        k = max(5, ok.sum() // 20)
        ax[0].plot(t[ok][k - 1 :], np.convolve(delta[ok], np.ones(k) / k, mode="valid"), label=f"mean of {k}")
    title = "Learning curve: log-likelihood gained per episode"
    ax[0].set(xlabel="time (s)", ylabel="episode ΔlogL", title=title)
    ax[0].legend()
    if updates:
        v = np.array([u["version"] for u in updates])
        ax[1].plot(v, [u["loss_q1"] for u in updates], label="Q1 loss")
        ax[1].plot(v, [u["loss_q2"] for u in updates], label="Q2 loss", alpha=0.7)
        ax[1].set(xlabel="update (weights version)", ylabel="loss", yscale="log")
        ax[1].legend()
    save(fig, "learning_curve.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    if updates:
        ms = np.array([u["update_seconds"] for u in updates]) * 1e3
        ax.hist(ms, bins=50)
        for q, style in ((50, "-"), (95, "--"), (99, ":")):
            value = np.percentile(ms, q)
            ax.axvline(value, color="k", linestyle=style, label=f"p{q} = {value:.1f} ms")
        ax.legend()
    title = f"Learner update latency ({len(updates)} updates)"
    ax.set(xlabel="update latency (ms)", ylabel="updates", title=title)
    save(fig, "update_latency.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(t, [r.get("updates_per_s", 0.0) for r in series], label="learner updates/s")
    ax.plot(t, [r.get("env_steps_per_s", 0.0) for r in series], label="environment steps/s")
    ax.set(xlabel="time (s)", ylabel="per second", title="Throughput")
    ax.legend()
    save(fig, "throughput.png")
    plots = ("learning_curve.png", "update_latency.png", "throughput.png")
    if args.json:
        written = [str(out / p) for p in plots]
        print(json.dumps({"run_dir": str(args.run_dir), "out": str(out), "plots": written}))
    else:
        print(f"report written to {out}: {', '.join(plots)}")
    return 0
