"""Train an agent with the whole system running as local processes (the embedded default).

Starts redis-server, the replay service, the learner and N actors; shows one live progress line;
stops everything cleanly on Ctrl-C, at --updates or after --minutes; leaves a run directory with
the config, logs, checkpoints, metrics, a summary and (unless --no-report) PNG plots.

The flags are defined here; the run itself is ``python -m services.launcher`` (``services/launcher/cli.py``),
started as a child process, so that the library never imports the services.
"""

from __future__ import annotations

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
    p.add_argument("--secure", action="store_true", default=None,
                   help="gRPC with TLS and a shared token (certificates and token made in the run's secrets/); "
                        "Redis always requires its ACL user's password")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-report", action="store_true", help="skip the PNG report at the end")
    p.add_argument("--json", action="store_true",
                   help="print the whole summary (summary.json) as the one JSON object on stdout, instead of its "
                        "main fields")


def run(args) -> int:
    """Run ``python -m services.launcher`` with this command's own flags and wait for it; Ctrl-C and
    SIGTERM are passed on once (the child has its own process group, so a terminal's Ctrl-C reaches it
    only through here)."""
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-m", "services.launcher", *args.argv], start_new_session=True)

    def forward(signum, _frame) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
