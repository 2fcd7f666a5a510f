"""Where a process's threads spend their time, sampled by py-spy: ``bench_system.py --py-spy`` records the
learner through its measured window with it.

:func:`record` starts ``py-spy record`` on a process (every thread, idle ones included, without pausing the
process: ``--nonblocking``; raw collapsed stacks). :func:`summarize` reads what it wrote: per thread group
(threads named alike, as ``batch-prefetcher-0`` and ``-1``, taken together) its samples and the places where
they were, each the innermost frames outside the standard library's thread and run machinery, with their share
of the group's samples. A thread blocked in a call that lets the interpreter lock go (a device sync, a queue,
a socket) is sampled where it waits, so the shares say where the time goes, waits included; which thread held
the lock is not recorded.

    python benchmarks/thread_profile.py RAW_FILE [--top 8] [--depth 2]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

_PLUMBING = ("threading.py", "runpy", "concurrent/futures/thread.py")
"""Frames of the thread and module-running machinery: below every thread's stack, so they tell nothing."""


def record(pid: int, seconds: float, out: str | Path, rate: int = 100) -> subprocess.Popen:
    """Start sampling process ``pid`` for ``seconds`` at ``rate`` per second into ``out`` (py-spy's raw
    format)."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("py-spy is not on PATH (pip install py-spy)")
    command = [spy, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))), "--rate", str(rate)]
    command += ["--threads", "--idle", "--nonblocking", "--format", "raw", "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def group_name(thread: str) -> str:
    """A thread's group: its name without a trailing number (``ThreadPoolExecutor-0_12`` ->
    ``ThreadPoolExecutor``)."""
    return re.sub(r"[-_]?\d+(_\d+)?$", "", thread) or thread


def summarize(raw: str | Path, top: int = 8, depth: int = 2) -> dict:
    """``{group: {"threads": n, "samples": n, "where": {place: share}}}`` from a raw py-spy file, the ``top``
    places of each group by samples; a place is the ``depth`` innermost frames (``function (file:line)``, the
    innermost first, joined by `` < ``)."""
    samples: dict[str, Counter] = {}
    threads: dict[str, set] = {}
    for line in Path(raw).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        head, *frames = stack.split(";")
        match = re.match(r"thread \((\w+)\): (.*)", head)
        if not match:
            continue
        group = group_name(match.group(2))
        threads.setdefault(group, set()).add(match.group(1))
        # (an idle pool worker)
        useful = [f for f in frames if not any(p in f for p in _PLUMBING)] or frames[-1:]
        place = " < ".join(reversed(useful[-depth:])) if useful else "(no Python frame)"
        samples.setdefault(group, Counter())[place] += int(count)
    out = {}
    for group, counter in sorted(samples.items(), key=lambda item: -sum(item[1].values())):
        total = sum(counter.values())
        out[group] = {
            "threads": len(threads[group]),
            "samples": total,
            "where": {place: round(n / total, 3) for place, n in counter.most_common(top)},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("raw", help="a py-spy raw file (record --format raw)")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--depth", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(summarize(args.raw, args.top, args.depth), indent=1))


if __name__ == "__main__":
    main()
