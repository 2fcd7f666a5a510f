"""Train an agent with the whole system running as local processes (the embedded default).

Starts redis-server, the replay service, the learner and N actors; shows one live progress line;
stops everything cleanly on Ctrl-C, at --updates or after --minutes; leaves a run directory with
the config, logs, checkpoints, metrics, a summary and (unless --no-report) PNG plots.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
from pathlib import Path

HELP = "train an agent: redis, replay, learner and actors as local processes"


def add_arguments(p) -> None:
    p.add_argument("--config", help="YAML/JSON file of TrainConfig fields (plus replay:, learner:, actor: sections)")
    p.add_argument("--actors", type=int, help="actor processes (default 2)")
    p.add_argument("--envs-per-actor", type=int, help="environments per actor (default 2)")
    p.add_argument("--alignments", nargs="+", action="extend", metavar="PATH",
                   help="alignment files and/or directories, repeatable (default: simulate a small corpus)")
    p.add_argument("--updates", type=int, help="learner updates (default 300; 0: until --minutes)")
    p.add_argument("--minutes", type=float, help="wall-clock limit (default 10; 0: none)")
    p.add_argument("--run-dir", help="run directory (default runs/<date-time>)")
    p.add_argument("--model", help="model string (default GTR+F+G4, parameters estimated per alignment)")
    p.add_argument("--device", help="learner device: cpu, cuda or auto (default)")
    p.add_argument("--features", choices=("rich", "basic"), help="observation feature set (default rich)")
    p.add_argument("--init-checkpoint", help="warm start: a learner checkpoint (phylorl warmstart) to start from")
    p.add_argument("--hidden", type=int, help="network width (default 64; ignored with --init-checkpoint)")
    p.add_argument("--horizon", type=int, help="steps per episode (default 10)")
    p.add_argument("--gamma", type=float, help="discount per step (default 0.9)")
    p.add_argument("--label-fraction", type=float,
                   help="fraction of states whose every move the actors score as demonstrations (default 0)")
    p.add_argument("--demo-weight", type=float, help="weight of the learner's supervised term on them (default 1)")
    p.add_argument("--prometheus", type=int, nargs="?", const=9090, metavar="PORT",
                   help="start the installed Prometheus on PORT (default 9090) scraping the run's services, so the "
                        "dashboards' queries work on this run")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-report", action="store_true", help="skip the PNG report at the end")


def build_config(args):
    import yaml

    from services.launcher.config import TrainConfig

    values = {}
    if args.config:
        loaded = yaml.safe_load(Path(args.config).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{args.config}: expected a mapping of TrainConfig fields")
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        unknown = sorted(set(loaded) - known)
        if unknown:
            raise ValueError(f"{args.config}: unknown fields {unknown}; known: {sorted(known)}")
        values.update(loaded)
    if args.alignments:
        values["alignments"] = ",".join(args.alignments)
    for name in ("actors", "envs_per_actor", "updates", "minutes", "run_dir", "model", "device", "seed",
                 "features", "init_checkpoint", "hidden", "horizon", "gamma", "label_fraction", "demo_weight",
                 "prometheus"):
        value = getattr(args, name)
        if value is not None:
            values[name] = value
    if args.no_report:
        values["report"] = False
    return TrainConfig(**values)


def totals(summary: dict) -> str:
    """One line of a finished run's totals (from ``summary.json``)."""
    episodes = summary.get("episodes", 0) or 0
    mean = summary.get("episode_delta_sum", 0.0) / episodes if episodes else float("nan")
    return (f"{summary.get('seconds', 0):6.0f}s  updates {summary.get('updates', 0):.0f}  env steps "
            f"{summary.get('env_steps', 0):.0f}  episodes {episodes:.0f} (mean ΔlogL {mean:.2f})  "
            f"weights v{summary.get('weights_version', 0):.0f}")


def run(args) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from phylorl.cli import CliError
    from services.launcher.run import run_local
    from services.launcher.supervisor import LaunchError

    config = build_config(args)
    if shutil.which("redis-server") is None:
        raise CliError("redis-server is not installed (scripts/install.sh installs it)")
    if config.prometheus and shutil.which("prometheus") is None:
        raise CliError("--prometheus: prometheus is not installed (scripts/install.sh installs it)")
    if config.init_checkpoint:
        from phylorl.agent.policy import AgentPolicy

        AgentPolicy.from_checkpoint(config.init_checkpoint)  # fail fast on a missing or foreign file
    run_dir = Path(config.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    if config.alignments:
        from phylorl.env.corpus import load_corpus

        load_corpus(config.alignments.split(","))  # fail fast, naming every unreadable file
    console = Console(stderr=True)
    console.print(f"run directory: {run_dir}  (logs in {run_dir / 'logs'})")
    stop = threading.Event()
    line = Text("starting redis, replay, learner and actors ...")

    def show(record: dict) -> None:
        line.plain = (
            f"{record['time_s']:6.0f}s  updates {record['updates']:.0f} ({record['updates_per_s']:.2f}/s, "
            f"{record['mean_update_ms']:.0f} ms)  env steps {record['env_steps']:.0f} "
            f"({record['env_steps_per_s']:.1f}/s)  replay {record['replay_size']:.0f}  "
            f"episode ΔlogL {record['mean_episode_delta_loglik']:.2f}  weights v{record['weights_version']:.0f}")

    def started(ports: dict) -> None:
        if ports.get("prometheus"):
            console.print(f"Prometheus: http://127.0.0.1:{ports['prometheus']} (ports of every service: "
                          f"{run_dir / 'ports.json'})")

    failed = None
    with Live(line, console=console, refresh_per_second=2, transient=False):
        try:
            summary = run_local(config, run_dir, lambda r: (show(r)), stop, on_started=started)
        except KeyboardInterrupt:
            stop.set()
            raise
        except LaunchError as exc:
            failed = exc
            line.plain = "every service stopped"
        else:
            line.plain = totals(summary)  # the run's totals, not the rates of a stopped system
    if failed is not None:
        raise CliError(f"{failed} (run directory {run_dir})")
    console.print(f"stopped: {summary['reason']} after {summary['seconds']:.0f} s; "
                  f"summary in {run_dir / 'summary.json'}")
    if summary.get("failure_log"):
        console.print(summary["failure_log"])
    if config.report and (run_dir / "metrics.jsonl").exists():
        from phylorl.cli import main as cli_main

        cli_main(["report", str(run_dir)])
    print(json.dumps({k: summary[k] for k in ("run_dir", "reason", "updates", "weights_version", "env_steps",
                                              "episodes") if k in summary}))
    return 0 if summary["reason"] in ("updates done", "time limit", "interrupted") else 1
