"""The embedded default: the whole system as local processes in one run directory.

``run_local(config, run_dir, on_progress, stop)`` starts redis-server (data in the run directory, AOF on), the
replay service, the learner and ``config.actors`` actors, waits for each to be healthy, then watches them:
every second it reads their metrics endpoints, hands a progress record to ``on_progress`` and appends it to
``metrics.jsonl``. It ends when the learner has done ``config.updates`` updates, when ``config.minutes`` have
passed, when ``stop`` is set (Ctrl-C) or when a service dies; then it stops everything cleanly and writes
``summary.json``.

Run directory: ``config.json`` (the whole TrainConfig), ``config/<service>.json`` (each service's config as it
reads it), ``logs/<service>.log``, ``redis/`` (AOF), ``checkpoints/``, ``learner/updates.csv``, ``corpus/``
(if simulated), ``metrics.jsonl``, ``summary.json``, ``ports.json`` (every service's gRPC and metrics port,
also in the summary), ``secrets/`` (mode 0600: Redis' ACL file and the password of its one user, which replay
and the learner log in as; with ``config.secure`` the TLS certificates and gRPC token too), ``spool/`` (the
actors' outbox journals and ``ledger.jsonl``) and, with ``config.prometheus``, ``prometheus/`` (its config and
data: the installed Prometheus scraping the run under the compose stack's job names;
``services/launcher/prometheus.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from phylorl.agent.checkpoints import latest_checkpoint
from services.common.config import write_config
from services.common.security import ClientCredentials, RedisAuth

from .config import TrainConfig
from .credentials import REDIS_USER, make_credentials
from .progress import rates, snapshot
from .prometheus import start_prometheus
from .supervisor import LaunchError, Service, StartInterrupted, Supervisor, flags, free_port


def simulate_corpus(config: TrainConfig, run_dir: Path) -> str:
    """Simulate the default corpus into ``run_dir/corpus`` with the ``phylorl simulate`` code path."""
    from phylorl.cli import main as cli_main

    out = run_dir / "corpus"
    corpus = dict(count=config.simulate_count, taxa=config.simulate_taxa, sites=config.simulate_sites)
    argv = ["simulate", *flags({"out_dir": out, **corpus, "seed": config.seed}), "--force"]
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the run's one JSON line
        if cli_main(argv) != 0:
            raise LaunchError("simulating the default corpus failed (see the lines above)")
    return str(out)


def prepare_shared_cache(
    model: str,
    cache: Path,
    alignments: str,
    run_dir: Path,
    on_stage: Callable[[str, bool], None] | None = None,
    stop: threading.Event | None = None,
) -> bool:
    """Prepare the corpus once, in parallel, into the cache every actor reads; ``on_stage`` hears how far it
    is (a line, and whether more follow). Whether it is all prepared (not when ``stop`` was set first)."""
    from phylorl.env.corpus import corpus_files
    from phylorl.env.prepare import prepare_corpus

    log_path = run_dir / "logs" / "prepare.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    files = corpus_files(alignments.split(","))
    with open(log_path, "a", buffering=1) as log:

        def done(path, count, total):
            log.write(f"prepared {path} ({count}/{total})\n")
            if on_stage is not None:
                on_stage(
                    f"preparing the corpus under {model}: {count}/{total} alignments (log: {log_path})",
                    count < total,
                )

        return prepare_corpus(files, model, cache, threads=os.cpu_count() or 1, on_done=done, stop=stop)


def run_local(
    config: TrainConfig,
    run_dir: Path,
    on_progress: Callable[[dict], None] | None = None,
    stop: threading.Event | None = None,
    on_started: Callable[[dict], None] | None = None,
    on_stage: Callable[[str, bool], None] | None = None,
) -> dict:
    """The run (module docstring); ``on_stage`` hears a line for each step before the services run (the
    corpus' preparation, alignment by alignment, then their start) and whether more of that step's lines
    follow."""
    from phylorl.cli.common import default_cache_dir

    stop = stop or threading.Event()
    config = config.absolute(str(run_dir))
    run_dir = Path(config.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2) + "\n")
    replay_cfg, learner_cfg, actor_cfg = config.sections()
    alignments = config.alignments or simulate_corpus(config, run_dir)
    # phylorl search's and eval's cache by default: keyed by content and model, a corpus is prepared once
    cache = Path(config.cache_dir) if config.cache_dir else default_cache_dir()
    sup = Supervisor(run_dir, stop)
    started, reason = time.monotonic(), "unknown"  # the run's clock and why it ended, for the summary
    summary: dict = {"run_dir": str(run_dir), "cache_dir": str(cache)}

    def start(name: str, section, **values) -> Service:
        """``python -m services.<kind> --config run_dir/config/<name>.json``: ``section`` with ``values``, as
        the service reads it (ports also as flags, so that ``ps`` shows which process is which)."""
        section, port = replace(section, **values), values.get("port", 0)
        path = write_config(section, run_dir / "config" / f"{name}.json")
        options = {"config": path, "metrics_port": section.metrics_port, **({"port": port} if port else {})}
        argv = [sys.executable, "-m", f"services.{name.split('-')[0]}", *flags(options)]
        return sup.add(Service(name, argv, run_dir / "logs" / f"{name}.log", port))

    try:
        if not prepare_shared_cache(actor_cfg.model, cache, alignments, run_dir, on_stage, stop):
            raise StartInterrupted("stopped while preparing the corpus")
        if on_stage is not None:
            on_stage("starting redis, replay, learner and actors ...", False)
        started = time.monotonic()  # the run's clock counts from the services' start
        made = make_credentials(run_dir / "secrets", hosts=("localhost", "127.0.0.1"))
        made = {name: str(path) for name, path in made.items()}
        redis_auth = {"redis_username": REDIS_USER, "redis_password_file": made["redis_password"]}
        grpc_server, grpc_client = {}, {}
        if config.secure:
            grpc_client = {"tls_ca_file": made["ca.crt"], "token_file": made["grpc_token"]}
            grpc_server = {"tls_cert_file": made["server.crt"], "tls_key_file": made["server.key"]}
            grpc_server["token_file"] = made["grpc_token"]
        client = ClientCredentials(**grpc_client)
        redis = sup.start_redis(made["redis_users.acl"], RedisAuth(**redis_auth))
        redis_url = f"redis://127.0.0.1:{redis.port}/0"
        server = {"host": "127.0.0.1", "redis_url": redis_url, **redis_auth, **grpc_server}
        replay_port, replay_metrics = free_port(), free_port()
        replay = start("replay", replay_cfg, port=replay_port, metrics_port=replay_metrics, **server)
        sup.wait_serving(replay, client)
        replay_address, learner_port, learner_metrics = f"127.0.0.1:{replay_port}", free_port(), free_port()
        learner = start(
            "learner",
            learner_cfg,
            port=learner_port,
            metrics_port=learner_metrics,
            replay_address=replay_address,
            run_dir=str(run_dir),
            **{**server, **grpc_client},
        )
        sup.wait_serving(learner, client)
        actor_ports = [free_port() for _ in range(config.actors)]
        for i, port in enumerate(actor_ports):
            start(
                f"actor-{i}",
                actor_cfg,
                learner_address=f"127.0.0.1:{learner_port}",
                replay_address=replay_address,
                metrics_port=port,
                alignments=alignments,
                cache_dir=str(cache),
                seed=config.seed + 1000 * i,
                actor_id=f"actor-{i}",
                spool_dir=str(run_dir / "spool"),
                **grpc_client,
            )
        ports = {
            "redis": redis.port,
            "replay": {"grpc": replay_port, "metrics": replay_metrics},
            "learner": {"grpc": learner_port, "metrics": learner_metrics},
            "actors": actor_ports,
            "prometheus": config.prometheus or None,
        }
        if config.prometheus:
            jobs = {"replay": [replay_metrics], "learner": [learner_metrics], "actor": actor_ports}
            targets = {job: [f"127.0.0.1:{port}" for port in job_ports] for job, job_ports in jobs.items()}
            start_prometheus(sup, run_dir / "prometheus", config.prometheus, targets)
        summary["ports"] = ports
        (run_dir / "ports.json").write_text(json.dumps(ports, indent=2) + "\n")
        if on_started is not None:
            on_started(ports)
        previous = snapshot(time.monotonic() - started, learner_metrics, replay_metrics, actor_ports)
        # metrics.jsonl and logs/supervisor.log (a line per restart event), each line written as it comes
        with (
            open(run_dir / "metrics.jsonl", "a", buffering=1) as series,
            open(run_dir / "logs" / "supervisor.log", "a", buffering=1) as events,
        ):
            while True:
                try:
                    interrupted = stop.wait(1.0)
                except KeyboardInterrupt:
                    interrupted = True
                if interrupted:
                    reason = "interrupted"
                    break
                now = time.monotonic() - started
                current = snapshot(now, learner_metrics, replay_metrics, actor_ports)
                record = {
                    **asdict(current),
                    **rates(previous, current),
                    "restarts": sum(s.restarts for s in sup.services),
                }
                series.write(json.dumps(record) + "\n")
                if on_progress is not None:
                    on_progress(record)
                previous = current
                if not learner.alive and learner.process.returncode == 0:
                    reason = "updates done"
                    break
                given_up = sup.revive(
                    config.max_restarts,
                    config.restart_backoff_s,
                    lambda message: events.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n"),
                )
                if given_up:
                    reason = f"{given_up[0].name} failed"
                    summary["failure_log"] = given_up[0].log_tail()
                    break
                if config.minutes and now >= 60 * config.minutes:
                    reason = "time limit"
                    break
        last = snapshot(time.monotonic() - started, learner_metrics, replay_metrics, actor_ports)
        summary.update(asdict(last))
    except StartInterrupted:
        reason = "interrupted"
    except LaunchError as exc:
        reason = "failed to start"
        summary["error"] = str(exc)
        raise
    finally:
        summary["exit_codes"] = sup.stop_all()
        summary["restarts"] = {service.name: service.restarts for service in sup.services if service.restarts}
        summary["reason"] = reason
        summary["seconds"] = time.monotonic() - started
        # the learner's own record of its updates: exact even when it exited before a last scrape (it stops at
        # its update count between two), and counting the updates before a restart (its metrics restart at 0)
        updates_csv = run_dir / "learner" / "updates.csv"
        rows = updates_csv.read_text().splitlines() if updates_csv.exists() else []
        if len(rows) > 1:
            last = dict(zip(rows[0].split(","), rows[-1].split(",")))
            summary.update(weights_version=float(last["version"]), updates=float(len(rows) - 1))
        with contextlib.suppress(FileNotFoundError):
            if (latest := latest_checkpoint(run_dir / "checkpoints")) is not None:
                summary["checkpoint"] = str(latest)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
