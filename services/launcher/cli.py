"""``phylorl train``: the embedded default run (:mod:`phylorl.cli.train`), as ``python -m services.launcher``
(which the ``phylorl`` command starts, so that the library never imports the services)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from phylorl.cli import CliError, run_command
from phylorl.cli import main as cli_main
from phylorl.cli.common import load_agent
from phylorl.cli.train import HELP
from services.common.config import add_flags, build, env_values, file_values, flag_values, merge, paths

from .config import SET_BY_LAUNCHER, TrainConfig
from .display import ProgressLine, totals
from .run import run_local
from .supervisor import LaunchError

ENV_PREFIX = "PHYLORL_TRAIN_"


def build_parser(advanced: bool = False) -> argparse.ArgumentParser:
    """``phylorl train``'s flags: one per TrainConfig field (sections included), derived from the dataclass;
    the sections' fields are listed by ``--help`` only with ``--advanced``."""
    parser = argparse.ArgumentParser(
        prog="phylorl train",
        description=f"{HELP}. Every field below can also come from --config FILE (YAML/JSON, "
        f"sections as mappings) or {ENV_PREFIX}<FIELD> (sections joined with __).",
        epilog=None
        if advanced
        else "The replay, learner and actor sections have fields of their own (--replay.*, "
        "--learner.*, --actor.*): phylorl train --help --advanced lists them.",
    )
    parser.add_argument(
        "--config", help="YAML or JSON file of TrainConfig fields (sections replay:, learner:, actor:)"
    )
    parser.add_argument("--advanced", action="store_true", help="with --help: list the sections' fields too")
    listed = (lambda path: True) if advanced else (lambda path: len(path) == 1)
    add_flags(parser, TrainConfig(), ENV_PREFIX, exclude=SET_BY_LAUNCHER, listed=listed)
    parser.add_argument("--no-report", action="store_true", help="the same as --report false")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the whole summary (summary.json) as the one JSON object on stdout, instead of its "
        "main fields",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_command("train", run, build_parser(advanced="--advanced" in argv).parse_args(argv))


def build_config(args, environ=None) -> TrainConfig:
    values = merge(
        file_values(args.config) if args.config else {},
        env_values(TrainConfig(), os.environ if environ is None else environ, ENV_PREFIX),
        flag_values(args, TrainConfig()),
    )
    if args.no_report:
        values["report"] = False
    taken = sorted(set(paths(values)) & SET_BY_LAUNCHER)
    if taken:
        raise ValueError(
            f"{taken[0]} is set by the launcher for a local run (ports, addresses, Redis, secrets, "
            f"directories and seeds are its own); leave it out"
        )
    return build(TrainConfig, values)


def run(args) -> int:
    from rich.console import Console

    config = build_config(args).absolute(f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    if shutil.which("redis-server") is None:
        raise CliError("redis-server is not installed (scripts/install.sh installs it)")
    if config.prometheus and shutil.which("prometheus") is None:
        raise CliError("--prometheus: prometheus is not installed (scripts/install.sh installs it)")
    if config.init_checkpoint:
        load_agent(config.init_checkpoint, None)  # fail fast on a missing or foreign file
    run_dir = Path(config.run_dir)
    if config.alignments:
        from phylorl.env.corpus import load_corpus

        load_corpus(config.alignments.split(","))  # fail fast, naming every unreadable file
    console = Console(stderr=True)
    console.print(f"run directory: {run_dir}  (logs in {run_dir / 'logs'})")
    stop = threading.Event()
    # SIGINT (Ctrl-C, forwarded by `phylorl train`) and SIGTERM end the run cleanly. Handlers are installed
    # here, not left to Python's default: a program started in the background by a shell (`phylorl train &`,
    # nohup) begins with SIGINT ignored, and Python then installs no KeyboardInterrupt handler at all.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: stop.set())

    def started(ports: dict) -> None:
        if ports.get("prometheus"):
            console.print(
                f"Prometheus: http://127.0.0.1:{ports['prometheus']} (ports of every service: "
                f"{run_dir / 'ports.json'})"
            )

    with ProgressLine(console, "preparing the corpus ...") as line:
        try:
            summary = run_local(config, run_dir, line.show, stop, on_started=started, on_stage=line.stage)
        except KeyboardInterrupt:
            stop.set()
            raise
        except LaunchError as exc:
            line.end("every service stopped")  # shown as the line ends, before the error
            raise CliError(f"{exc} (run directory {run_dir})") from None
        line.end(totals(summary))  # the run's totals, not the rates of a stopped system
    console.print(
        f"stopped: {summary['reason']} after {summary['seconds']:.0f} s; "
        f"summary in {run_dir / 'summary.json'}"
    )
    if summary.get("failure_log"):
        console.print(summary["failure_log"])
    if config.report and (run_dir / "metrics.jsonl").exists():
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the one JSON object below
            cli_main(["report", str(run_dir)])
    keys = ("run_dir", "reason", "updates", "weights_version", "env_steps", "episodes")
    print(json.dumps(summary if args.json else {k: summary[k] for k in keys if k in summary}))
    return 0 if summary["reason"] in ("updates done", "time limit", "interrupted") else 1
