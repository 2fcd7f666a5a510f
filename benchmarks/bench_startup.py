"""What a new process pays before it works: the wall time of fresh interpreters importing what each kind of
phylorl process imports, and of a whole short ``phylorl search``; prints one JSON line.

Each figure is the median of ``--repeats`` runs (a new ``python3`` each, one after another, numba's kernels
already in their cache):

* ``import_<name>_s``: ``python3 -c "import <module>"`` for the modules every environment process (actors,
  search, eval workers), the actor service and the agent's processes (search and eval with ``--policy agent``,
  the learner) import first; ``python_s``: ``python3 -c pass``, the interpreter alone, for reference;
* ``search_s``: ``phylorl search --policy hillclimb`` on one 7-taxon alignment of the corpus (its preparation
  cached by a first run that is not counted): start-up, reading, the search and the answer;
* ``search_agent_s``: the same with ``--policy agent`` (the shipped agent: torch and the network's start too);
* ``first_move_s``: ``phylorl search --policy agent --polish`` on ``examples/DS1.fasta`` (27 taxa) with an
  empty preparation cache, as a user's first search after the install: the wall time from its start to the
  line that says the search starts moving (start-up, reading, preparing the alignment, the agent and the start
  tree).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, child_env, emit, machine

MODULES = {"env": "phylorl.env.tree_env", "actor": "services.actor.actor", "agent": "phylorl.agent.policy"}
DEFAULT_ALIGNMENT = REPO.parent / "shared" / "data" / "real" / "valid" / "TreeBASE_10756.phy"


def wall_s(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO
    )
    return time.perf_counter() - started


def first_move_s(command: list[str], env: dict) -> float:
    """Seconds from starting ``command`` to its stderr line that begins ``searching with`` (the search's first
    move follows it); the command is then run to its end."""
    started = time.perf_counter()
    with subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    ) as process:
        moving = None
        for line in process.stderr:
            if moving is None and line.startswith("searching with"):
                moving = time.perf_counter() - started
        if process.wait() != 0 or moving is None:
            raise RuntimeError(f"{' '.join(command)} failed or never started searching")
    return moving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--alignment",
        default=str(DEFAULT_ALIGNMENT),
        help="the alignment of the search figure (small: the figure is mostly start-up)",
    )
    args = parser.parse_args()
    if not Path(args.alignment).is_file():
        sys.exit(f"bench_startup: no alignment at {args.alignment} (give --alignment)")
    env, cli = child_env(), [sys.executable, "-m", "phylorl.cli", "search"]
    first = [*cli, "--alignment", str(REPO / "examples" / "DS1.fasta"), "--policy", "agent", "--polish"]
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as cache:
        commands = {"python_s": [sys.executable, "-c", "pass"]}
        search = [*cli, "--alignments", args.alignment, "--policy"]
        for name, policy in (("search_s", "hillclimb"), ("search_agent_s", "agent")):
            commands[name] = [*search, policy, "--cache-dir", cache, "--json"]
        commands.update(
            {f"import_{name}_s": [sys.executable, "-c", f"import {m}"] for name, m in MODULES.items()}
        )
        # once each first: the preparation cached, the files in the page cache
        for command in commands.values():
            wall_s(command, env)
        runs: dict[str, list[float]] = {name: [] for name in [*commands, "first_move_s"]}
        # interleaved: a slow moment of the machine falls on every figure alike
        for repeat in range(args.repeats):
            for name, command in commands.items():
                runs[name].append(wall_s(command, env))
            fresh = str(Path(cache) / f"first-{repeat}")  # an empty preparation cache: a user's first search
            runs["first_move_s"].append(first_move_s([*first, "--cache-dir", fresh, "--json"], env))
    emit(
        {
            "benchmark": "bench_startup",
            "machine": machine(),
            "repeats": args.repeats,
            "alignment": Path(args.alignment).name,
            **{name: round(statistics.median(values), 3) for name, values in runs.items()},
            "runs": {name: [round(v, 3) for v in values] for name, values in runs.items()},
        }
    )


if __name__ == "__main__":
    main()
