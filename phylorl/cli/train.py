"""Train an agent with the whole system running as local processes (the embedded default).

Starts redis-server, the replay service, the learner and N actors; shows one live progress line; stops
everything cleanly on Ctrl-C, at --updates or after --minutes; leaves a run directory with the config, logs,
checkpoints, metrics, a summary and (unless --no-report) PNG plots.

The run and its flags are ``python -m services.launcher`` (``services/launcher/cli.py``), started as a child
process with every argument, ``--help`` included, so that the library never imports the services.
"""

from __future__ import annotations

HELP = "train an agent: redis, replay, learner and actors as local processes"


def add_arguments(p) -> None:
    p.add_argument("args", nargs="*", help="the run's flags (phylorl train --help lists them)")


def run(args) -> int:
    """Run ``python -m services.launcher`` with this command's own flags and wait for it; Ctrl-C and
    SIGTERM are passed on once (the child has its own process group, so a terminal's Ctrl-C reaches it
    only through here)."""
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-m", "services.launcher", *args.argv], process_group=0)
    previous = {
        s: signal.signal(s, lambda signum, _: child.send_signal(signum))
        for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        return child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
