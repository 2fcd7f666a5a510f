"""The whole system at a chosen size: ``phylorl train`` (redis-server, replay, learner, N actors as real
processes) for a fixed time, measured from the services' own Prometheus endpoints and /proc.

After the warm-up (preparation, compilation, replay filling to its minimum) it reads every endpoint, waits
``--seconds`` and reads them again. One JSON line: sustained updates/s and environment steps/s, the actors'
inference call latency p50/p99 (their histogram), the endpoint's own latency p50, median batch and mean time
per stage of its work (``phylorl_inference_stage_seconds``: what the actors' wait is made of), the learner's
update latency p50 and mean (and the fraction of updates replayed as CUDA graphs), its mean time per
publication of the weights (``publish_mean_ms``), the fraction of the learner's time spent waiting for a batch
(its feed), the fraction of the actors' time spent waiting for an inference answer and for the replay's rate
limiter to take their transitions (``actor_insert_limited_fraction``), the replay's sample calls' time held by
the limiter per second (``sample_limited_per_s``: which side the replay ratio holds back), the fraction of the
endpoint's batches replayed as CUDA graphs, the policy lag (weights versions between acting and learning), the
services' restarts during the run, and the CPU each service used (cores, from /proc), with the machine named.
``--py-spy``: also where the learner's threads spend the measured window: py-spy samples every thread, idle
ones included, into a speedscope profile beside the run directory (``learner_py_spy``: its path; open it with
speedscope, whose per-thread views show where each thread's time goes, waits included).

``--no-updates`` measures the acting side alone: the replay service never reaches its sampling minimum, so the
learner only serves inference (with its initial weights) and the actors are limited by their own cores or by
the endpoint, not by the replay ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import (
    add_flags,
    cpu_seconds,
    emit,
    machine,
    pid_of,
    run_ports,
    service_patterns,
    start_train,
    stop_train,
)
from prometheus_client.parser import text_string_to_metric_families

RUN_OPTIONS = ("actors", "envs_per_actor", "taxa", "batch_size", "hidden")
RUN_OPTIONS += ("cuda_graphs", "fused_head", "tf32")
"""The options the JSON line repeats as they were given."""


def read_metrics(port: int) -> dict:
    """``{(name, labels without le): value}`` plus histogram buckets as ``{(name, labels): {le: count}}``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    values, buckets = {}, {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            if s.name.endswith("_bucket"):
                buckets.setdefault((s.name[:-7], labels), {})[float(s.labels["le"])] = s.value
            else:
                values[(s.name, labels)] = s.value
    return {"values": values, "buckets": buckets}


def total(readings: list[dict], name: str, label: tuple | None = None) -> float:
    """The sum of the series ``name`` over ``readings``: all of them, or those of the one label ``label``."""
    return sum(
        v
        for r in readings
        for (n, labels), v in r["values"].items()
        if n == name and (label is None or labels == (label,))
    )


def histogram(readings: list[dict], name: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for r in readings:
        for (n, _), counts in r["buckets"].items():
            if n == name:
                for le, c in counts.items():
                    out[le] = out.get(le, 0.0) + c
    return out


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The ``q`` quantile of the observations between two readings of a cumulative histogram (linear within a
    bucket, Prometheus' histogram_quantile)."""
    edges = sorted(after)
    counts = [after[e] - before.get(e, 0.0) for e in edges]
    if not counts or counts[-1] <= 0:
        return None
    target, lower, below = q * counts[-1], 0.0, 0.0
    for edge, count in zip(edges, counts):
        if count >= target:
            if edge == float("inf"):
                return lower
            return lower + (edge - lower) * (target - below) / max(count - below, 1e-12)
        lower, below = edge, count
    return lower


def py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    """``py-spy record`` of every thread of ``pid`` (idle ones too, without pausing it) for ``seconds``,
    written to ``out`` as a speedscope profile."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("py-spy is not on PATH (pip install py-spy)")
    command = [spy, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))), "--rate", "100"]
    command += ["--threads", "--idle", "--nonblocking", "--format", "speedscope", "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def config_sections(args) -> str:
    """The actors' and the learner's options of the run's config file (YAML), from the flags."""
    actor = f"actor: {{pipeline: {args.actor_pipeline}}}\n" if args.actor_pipeline else ""
    fields = ["tf32: true"] if args.tf32 else []
    fields += [f"torch_threads: {args.learner_threads}"] if args.learner_threads else []
    fields.append(f"inference_cuda_graphs: {'true' if args.cuda_graphs else 'false'}")
    options = [name for name in ("cuda_graphs", "fused_head") if getattr(args, name)]
    if options:
        fields.append("agent: {" + ", ".join(f"{name}: true" for name in options) + "}")
    return actor + "learner: {" + ", ".join(fields) + "}\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--actors", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    p.add_argument("--envs-per-actor", type=int, default=2)
    p.add_argument("--taxa", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--warmup-s", type=float, default=60.0)
    p.add_argument("--device", default="auto")
    p.add_argument("--run-dir", default="")
    p.add_argument(
        "--actor-pipeline",
        type=int,
        default=0,
        help="groups each actor's environments are split into (ActorConfig.pipeline; 0: the actor's default)",
    )
    p.add_argument(
        "--learner-threads", type=int, default=0, help="the learner's torch threads (0: its default)"
    )
    add_flags(
        p,
        {
            "--cuda-graphs": "the learner replays its updates and the inference endpoint its answers as CUDA "
            "graphs",
            "--tf32": "the learner's float32 products use TF32 (CUDA)",
            "--fused-head": "the learner's no-grad next-move passes and its inference endpoint use the fused "
            "Triton head (CUDA)",
            "--py-spy": "sample the learner's threads with py-spy through the measured window (needs "
            "py-spy on PATH): a speedscope profile beside the run directory, its path as learner_py_spy",
            "--no-updates": "the learner never trains (the replay minimum is never reached): acting alone is "
            "measured",
        },
    )
    args = p.parse_args(argv)
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="bench-system-")) / "run"
    config, spy_file = run_dir.parent / "bench.yaml", run_dir.parent / "learner-py-spy.speedscope.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f"simulate_count: 8\nsimulate_taxa: '{args.taxa}:{args.taxa}'\nsimulate_sites: '1000:1000'\n"
        f"batch_size: {args.batch_size}\nhidden: {args.hidden}\nhorizon: 20\n"
        + (
            "min_replay: 1000000\nsamples_per_insert: 0.0\nreplay: {capacity: 1000000}\n"
            if args.no_updates
            else "min_replay: 1000\nsamples_per_insert: 8.0\n"
        )
        + config_sections(args)
    )
    minutes = (args.warmup_s + args.seconds) / 60 + 15
    settings = (
        f"--actors {args.actors} --envs-per-actor {args.envs_per_actor} --updates 0 --minutes {minutes:.2f}"
    )
    train = start_train([*settings.split(), "--no-report", "--device", args.device], config, run_dir)
    try:
        started = time.monotonic()
        ports = run_ports(train, run_dir, 900)
        endpoints = {"replay": [ports["replay"]["metrics"]], "learner": [ports["learner"]["metrics"]]}
        endpoints["actor"] = ports["actors"]
        ready = ("learner", "phylorl_learner_updates_total")
        if args.no_updates:  # acting alone: ready when the actors step
            ready = ("actor", "phylorl_actor_env_steps_total")

        def count(kind: str, name: str) -> float:  # 0 while a service is still starting
            try:
                return total([read_metrics(port) for port in endpoints[kind]], name)
            except OSError:
                return 0.0

        while count(*ready) < 1:
            if train.poll() is not None or time.monotonic() - started > 1800:
                raise RuntimeError(f"no {ready[1]} yet: {train.stderr.read()[-2000:]}")
            time.sleep(2)
        time.sleep(args.warmup_s)
        pids = {name: pid_of(pattern) for name, pattern in service_patterns(ports).items()}

        def reading():
            return (
                {kind: [read_metrics(port) for port in group] for kind, group in endpoints.items()},
                {name: cpu_seconds(pid) for name, pid in pids.items() if pid},
                time.monotonic(),
            )

        spy = py_spy(pids["learner"], args.seconds, spy_file) if args.py_spy else None
        (first, cpu0, t0), _ = reading(), time.sleep(args.seconds)
        second, cpu1, t1 = reading()
        if spy is not None and spy.wait(60) != 0:
            raise RuntimeError(f"py-spy failed: {spy.stderr.read()[-500:]}")
    finally:
        stop_train(train)
    elapsed = t1 - t0

    def delta(kind: str, name: str, label: tuple | None = None) -> float:  # a series' change over the window
        return total(second[kind], name, label) - total(first[kind], name, label)

    def q(kind: str, name: str, quant: float) -> float | None:
        value = quantile(histogram(first[kind], name), histogram(second[kind], name), quant)
        return None if value is None else round(value, 5)

    def mean_ms(name: str, label: tuple | None = None) -> float | None:  # a learner histogram's mean
        count = delta("learner", f"{name}_count", label)
        return round(1e3 * delta("learner", f"{name}_sum", label) / count, 3) if count else None

    graphed = delta("learner", "phylorl_inference_batches_total", ("path", "graph"))
    eager = delta("learner", "phylorl_inference_batches_total", ("path", "eager"))

    limited = lambda call: delta("replay", "phylorl_replay_rate_limited_seconds_total", ("call", call))  # noqa: E731
    updates = delta("learner", "phylorl_learner_updates_total")
    series = (
        (run_dir / "metrics.jsonl").read_text().splitlines() if (run_dir / "metrics.jsonl").exists() else []
    )
    restarts = json.loads(series[-1]).get("restarts") if series else None
    used = {n: cpu1[n] - cpu0[n] for n in cpu1 if n in cpu0}
    cores = {n: round(v / elapsed, 3) for n, v in used.items() if not n.startswith("actor")}
    cores["actors (all)"] = round(sum(v for n, v in used.items() if n.startswith("actor")) / elapsed, 3)
    result = {
        "benchmark": "bench_system",
        "machine": machine(),
        **{name: getattr(args, name) for name in RUN_OPTIONS},
        "pipelined_updates": False,
        "actor_pipeline": args.actor_pipeline or "default",
        "actor_rpc": "stream",
        "learner_threads": args.learner_threads or "default",
        "inference_server": "asyncio",
        "feed_processes": 0,
        "no_updates": args.no_updates,
        "switch_interval_ms": "default",
        "seconds": round(elapsed, 1),
        "updates_per_s": round(updates / elapsed, 3),
        "env_steps_per_s": round(delta("actor", "phylorl_actor_env_steps_total") / elapsed, 2),
        "transitions_per_s": round(delta("replay", "phylorl_replay_inserted_total") / elapsed, 2),
        "inference_p50_s": q("actor", "phylorl_actor_inference_call_seconds", 0.5),
        "inference_p99_s": q("actor", "phylorl_actor_inference_call_seconds", 0.99),
        "inference_endpoint_p50_s": q("learner", "phylorl_inference_latency_seconds", 0.5),
        "inference_batch_p50": q("learner", "phylorl_inference_batch_size", 0.5),
        "inference_stage_mean_ms": {
            s: mean_ms("phylorl_inference_stage_seconds", ("stage", s))
            for s in ("inputs", "batch", "network", "reply")
        },
        "update_p50_s": q("learner", "phylorl_learner_update_seconds", 0.5),
        "update_mean_s": round(delta("learner", "phylorl_learner_update_seconds_sum") / max(updates, 1), 5),
        "publish_mean_ms": mean_ms("phylorl_learner_publish_seconds"),
        "graph_replay_fraction": round(
            delta("learner", "phylorl_learner_graph_replays_total") / max(updates, 1), 3
        ),
        "inference_graph_fraction": round(graphed / (graphed + eager), 3) if graphed + eager else None,
        "service_restarts": restarts,
        "actor_inference_wait_fraction": round(
            delta("actor", "phylorl_actor_inference_wait_seconds_total") / elapsed / args.actors, 4
        ),
        "feed_wait_fraction": round(delta("learner", "phylorl_learner_batch_wait_seconds_sum") / elapsed, 4),
        "actor_insert_limited_fraction": round(limited("insert") / elapsed / args.actors, 4),
        "sample_limited_per_s": round(limited("sample") / elapsed, 4),
        "policy_lag_p50_versions": q("learner", "phylorl_learner_policy_lag_versions", 0.5),
        "cpu_cores": cores,
    }
    if args.py_spy:
        result["learner_py_spy"] = str(spy_file)
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
