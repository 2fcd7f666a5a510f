#!/usr/bin/env python3
"""Soak: ``phylorl train`` for a while under a schedule of faults, then count what was lost.

    python tests/e2e/soak.py --minutes 30 --json soak.json [--actors 2] [--fault-every 30] [--faults N]
        [--kinds K,...] [--run-dir DIR]

The run is the embedded default (redis-server, replay, learner, actors as local processes, supervised). Every
``--fault-every`` seconds the next fault of the cycle (``--kinds``, default all, in this order) is injected:

    kill-replay, kill-actor, kill-learner,   kill -9 of that service (the launcher starts it again; Redis
    kill-redis                               on its AOF, fsynced before every acknowledged insert)
    restart-redis                            SIGTERM to redis-server (it writes its AOF and exits; the
                                             launcher starts it again on the same data)
    stall-replay, stall-redis                SIGSTOP for --stall-s seconds, then SIGCONT: a link that stops
                                             carrying anything while its peers wait

A fault is survived when the service runs again and the learner's weights version moves past where it was.
Faults stop ``--quiet-s`` before the end, so restarted actors can deliver; then the run is stopped with Ctrl-C
(SIGINT) as a user would. With ``--faults N`` the run ends ``--quiet-s`` after the N-th fault is survived
(``--minutes`` is then a limit), so a short soak of the whole cycle wastes no time. Then:

- produced: the transitions the actors numbered, from their own ledger (``spool/ledger.jsonl``: one line per
  producer when it stops, or when the next actor recovers its journal after a kill) and any journal left;
- stored: read back from Redis (a fresh redis-server on the run's AOF) with tests/replay_audit.py, each
  record with the producer and number it was sent with;
- lost: numbers a producer gave out that Redis does not hold and no journal still holds; duplicated:
  records held twice (same producer and number); stored_but_not_produced: held numbers beyond a ledger.

A probe asks the inference endpoint for a move every 0.25 s (a real observation of the run's corpus, as the
messages of one open ``ActStream``, reopened after a failure as actors do) and reports the worst and p99
latency of the requests answered. The JSON also has the faults, the restarts and the run's summary. Exit
status 0 when lost and duplicated are 0 and every fault was survived, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from benchmarks.common import pid_of, run_ports, service_patterns, start_train, stop_train  # noqa: E402

FAULTS = ("kill-replay", "kill-actor", "kill-learner", "kill-redis", "restart-redis")
FAULTS += ("stall-replay", "stall-redis")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--minutes",
        type=float,
        required=True,
        help="length of the run (faults included); with --faults, the longest it may run",
    )
    p.add_argument("--json", required=True, help="where the report goes")
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--fault-every", type=float, default=30.0, help="seconds between faults")
    p.add_argument("--stall-s", type=float, default=8.0, help="how long a stall lasts")
    p.add_argument("--quiet-s", type=float, default=45.0, help="no faults in the last this many seconds")
    p.add_argument(
        "--faults",
        type=int,
        default=None,
        help="inject this many faults (the cycle's first N), then end the run --quiet-s seconds later",
    )
    p.add_argument(
        "--kinds",
        default=",".join(FAULTS),
        help="comma-separated faults the cycle holds, in order (default: all of them); e.g. stall-redis "
        "alone to press on one failure",
    )
    p.add_argument("--run-dir", default="", help="the run directory (default: a new one under runs/)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    for kind in args.kinds:
        if kind not in FAULTS:
            p.error(f"--kinds: unknown fault {kind!r} (known: {', '.join(FAULTS)})")
    if not args.kinds:
        p.error("--kinds names no fault")
    return args


def progress(run_dir: Path) -> float:
    """The learner's weights version (one per update; unlike its update counter it goes on across
    restarts)."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return float(json.loads(lines[-1])["weights_version"]) if lines else 0.0
    except (OSError, ValueError, KeyError):
        return 0.0


class Probe(threading.Thread):
    """Asks the learner's inference endpoint for one move every ``every_s`` (through the actors' own client,
    :class:`services.actor.act_stream.ActStream`); keeps the answered latencies."""

    def __init__(self, run_dir: Path, address: str, every_s: float = 0.25):
        super().__init__(daemon=True)
        self.run_dir, self.address, self.every_s = run_dir, address, every_s
        self.latencies: list[float] = []
        self.refused = 0
        self.stop = threading.Event()

    def observation_request(self):
        from phylorl.env.config import EnvConfig
        from phylorl.env.corpus import load_corpus
        from phylorl.env.prepare import PreparationCache
        from phylorl.env.tree_env import EnvAlignment, TreeEnv
        from phylorl.records.codec import encode_observation
        from phylorl.wire import codec
        from phylorl.wire.v1 import inference_pb2

        actor = json.loads((self.run_dir / "config" / "actor-0.json").read_text())  # as the actors run
        features = actor["env"]["features"]
        entry = load_corpus([str(self.run_dir / "corpus")]).entries[0]
        prepared = PreparationCache(actor["cache_dir"]).get(entry.alignment, actor["model"])
        built = EnvAlignment.build(entry.alignment, prepared, str(entry.path))
        env = TreeEnv([built], EnvConfig(features=features), seed=1)
        env.reset(0)
        request = inference_pb2.ActRequest(actor_id="soak-probe", greedy=True)
        codec.pack_records([encode_observation(env.observation(features))], request.states)
        return request

    def run(self) -> None:
        request = self.observation_request()

        import grpc

        from phylorl.wire.v1 import inference_pb2_grpc
        from services.actor.act_stream import ActStream

        with grpc.insecure_channel(self.address) as channel:
            calls = ActStream(inference_pb2_grpc.InferenceServiceStub(channel), timeout_s=30)
            try:
                while not self.stop.wait(self.every_s):
                    started = time.perf_counter()
                    try:
                        calls.send(request)
                        calls.receive()
                        self.latencies.append(time.perf_counter() - started)
                    except grpc.RpcError:  # (the stream is closed; the next send opens a new one)
                        self.refused += 1  # the learner away (killed, restarting) or overloaded
            finally:
                calls.close()


class Soak:
    def __init__(self, args, run_dir: Path):
        self.args, self.run_dir = args, run_dir
        self.ports: dict = {}
        self.faults: list[dict] = []

    def inject(self, kind: str, index: int) -> None:
        service = f"actor-{index % len(self.ports['actors'])}" if kind == "kill-actor" else kind.split("-")[1]
        pattern = service_patterns(self.ports)[service]
        pid, before, at = pid_of(pattern), progress(self.run_dir), time.monotonic()
        record = {"kind": kind, "service": service, "at_s": round(at - self.started, 1), "pid": pid}
        record.update(version_before=before, survived=False)
        self.faults.append(record)
        if pid is None:
            record["error"] = "no such process"
            return
        if kind.startswith("stall"):
            os.kill(pid, signal.SIGSTOP)
            time.sleep(self.args.stall_s)
            os.kill(pid, signal.SIGCONT)
        else:
            os.kill(pid, signal.SIGTERM if kind == "restart-redis" else signal.SIGKILL)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            now = pid_of(pattern)
            if (
                now is not None
                and (kind.startswith("stall") or now != pid)
                and progress(self.run_dir) > before
            ):
                record.update(survived=True, recovered_s=round(time.monotonic() - at, 1), new_pid=now)
                return
            time.sleep(0.5)

    def run(self) -> dict:
        args = self.args
        config = self.run_dir.with_suffix(".yaml")
        config.write_text(
            "model: GTR+F+G4\nhorizon: 10\nbatch_size: 16\nhidden: 32\nmin_replay: 64\npublish_every: 5\n"
            "simulate_count: 4\nsimulate_taxa: '7:9'\nsimulate_sites: '300:500'\nmax_restarts: 1000\n"
            f"restart_backoff_s: 0.5\nseed: {args.seed}\nreplay: {{capacity: 5000000}}\n"
            "learner: {checkpoint_every: 50, checkpoint_seconds: 20}\n"
            "actor: {send_batch: 8, rpc_timeout_s: 30}\n"
        )
        settings = f"--actors {args.actors} --updates 0 --minutes {args.minutes + 5} --no-report"
        train = start_train(settings.split(), config, self.run_dir)
        self.started = time.monotonic()
        try:
            self.ports = run_ports(train, self.run_dir, 600, ready=lambda: progress(self.run_dir) >= 1)
            probe = Probe(self.run_dir, f"127.0.0.1:{self.ports['learner']['grpc']}")
            probe.start()
            end = self.started + 60 * args.minutes
            index = 0
            while time.monotonic() + args.fault_every < end - args.quiet_s and (
                args.faults is None or index < args.faults
            ):
                time.sleep(args.fault_every)
                kind = args.kinds[index % len(args.kinds)]
                print(f"[soak +{time.monotonic() - self.started:5.0f}s] {kind}", flush=True)
                self.inject(kind, index // len(args.kinds))
                index += 1
            if args.faults is not None:  # every fault asked for is in: a quiet spell, then the end
                end = min(end, time.monotonic() + args.quiet_s)
            while time.monotonic() < end:
                time.sleep(1)
            probe.stop.set()
        finally:
            stop_train(train)
        summary = json.loads((self.run_dir / "summary.json").read_text())
        latencies = sorted(probe.latencies)
        counts = count_transitions(self.run_dir)
        return {
            "minutes": args.minutes,
            "actors": args.actors,
            "run_dir": str(self.run_dir),
            "transitions": counts,
            "faults": {
                "injected": len(self.faults),
                "survived": sum(f["survived"] for f in self.faults),
                "schedule": self.faults,
            },
            "restarts": summary.get("restarts", {}),
            "reason": summary.get("reason"),
            "exit_status": train.returncode,
            "updates": summary.get("updates"),
            "weights_version": summary.get("weights_version"),
            "inference": {
                "answered": len(latencies),
                "refused": probe.refused,
                "worst_s": round(latencies[-1], 4) if latencies else None,
                "p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 4) if latencies else None,
            },
            "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        }


def count_transitions(run_dir: Path) -> dict:
    """Produced (the actors' ledger and journals) against stored (Redis, read back from the run's AOF)."""
    from replay_audit import read_table

    from services.actor.outbox import read_journal
    from services.common.security import RedisAuth, redis_client
    from services.launcher.credentials import REDIS_USER
    from services.launcher.supervisor import Supervisor

    produced: dict[str, int] = {}
    ledger = run_dir / "spool" / "ledger.jsonl"
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        entry = json.loads(line)
        produced[entry["producer"]] = max(produced.get(entry["producer"], 0), entry["produced"])
    waiting: dict[str, set[int]] = defaultdict(set)
    # left by an actor stopped or killed at the very end
    for journal in (run_dir / "spool").glob("*.journal"):
        found = read_journal(journal)
        produced[found.producer] = max(produced.get(found.producer, 0), found.produced)
        waiting[found.producer].update(number for _, _, number in found.pending)
    # a fresh redis-server on the run's own AOF and ACL, started as the launcher starts it
    supervisor = Supervisor(run_dir)
    secrets = run_dir / "secrets"
    auth = RedisAuth(redis_username=REDIS_USER, redis_password_file=str(secrets / "redis_password"))
    try:
        redis_service = supervisor.start_redis(secrets / "redis_users.acl", auth)
        held = read_table(redis_client(f"redis://127.0.0.1:{redis_service.port}/0", auth), "phylorl:replay")
    finally:
        supervisor.stop_all()
    stored: dict[str, set[int]] = defaultdict(set)
    for origin in held.origins:
        if origin is not None:
            stored[origin[0]].add(origin[1])
    lost = sum(len(set(range(n)) - stored[p] - waiting[p]) for p, n in produced.items())
    beyond = sum(sum(1 for k in stored[p] if k >= produced.get(p, 0)) for p in stored)
    return {
        "produced": sum(produced.values()),
        "stored": len(held.records),
        "waiting_in_journals": sum(len(w - stored[p]) for p, w in waiting.items()),
        "lost": lost,
        "duplicated": held.duplicates(),
        "producers": len(produced),
        "stored_but_not_produced": beyond,
        "without_origin": sum(o is None for o in held.origins),
    }


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    run_dir = Path(args.run_dir or REPO / "runs" / time.strftime("soak-%Y%m%d-%H%M%S")).resolve()
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    report = Soak(args, run_dir).run()
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    t = report["transitions"]
    print(
        f"soak {args.minutes:g} min: produced {t['produced']}, stored {t['stored']}, lost {t['lost']}, "
        f"duplicated {t['duplicated']}; faults {report['faults']['survived']}/{report['faults']['injected']} "
        f"survived; worst inference {report['inference']['worst_s']} s; report in {args.json}"
    )
    clean = not (t["lost"] or t["duplicated"] or t["stored_but_not_produced"])
    return 0 if clean and report["faults"]["survived"] == report["faults"]["injected"] else 1


if __name__ == "__main__":
    sys.exit(main())
