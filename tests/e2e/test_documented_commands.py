"""The README's and the quickstart's commands, run as written: from the repository's root (a fresh clone's, in
CI) and from a fresh empty directory, with their defaults, relative paths included.

The commands are read from the documents themselves (every line of their ``bash`` and ``python`` blocks), so a
changed document is tested as it now reads. The few that cannot run here say so in their comment: ``[GPU]``
(``--device cuda``, ``build_image.sh --gpu``) and ``[Docker]`` (the compose and swarm stacks, which
``test_compose.py`` and ``test_swarm.py`` run). ``bash scripts/install.sh`` and ``bash .ci/run`` are what CI
itself runs before and as these tests. Training commands run on a small update budget given through the
environment (``PHYLORL_TRAIN_UPDATES``), the one thing changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/quickstart.md")
RUN_BY_CI = ("bash scripts/install.sh", "bash .ci/run")
UPDATES = "30"
"""The update budget of every documented ``phylorl train`` here (PHYLORL_TRAIN_UPDATES)."""
NOT_HERE = {"[GPU]": ("cuda", "--gpu"), "[Docker]": ("docker",)}
"""Markers of commands that cannot run on a machine without a GPU or outside the Docker tests, and what each
such command must mention (a marker cannot hide an ordinary command)."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def documented(path: Path) -> list[tuple[str, str]]:
    """``(kind, command)`` for every command of ``path``'s fenced ``bash`` blocks (continued lines joined, the
    comment kept after a ``#``) and every ``python`` block whole, in document order."""
    found = []
    for kind, body in re.findall(r"```(bash|python)\n(.*?)```", path.read_text(), re.S):
        if kind == "python":
            found.append((kind, body))
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                found.append((kind, line.strip()))
    return found


def split_comment(line: str) -> tuple[str, str]:
    """A shell line's command and its trailing comment (a ``#`` after whitespace, outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def runnable(line: str) -> list[str]:
    """The parts of a documented shell line this test runs: its ``&&``-joined commands, less what CI runs
    itself and what its comment marks as needing a GPU or Docker (checked to mention them)."""
    command, comment = split_comment(line)
    for marker, words in NOT_HERE.items():
        if marker in comment:
            assert any(word in command for word in words), (
                f"{line!r} is marked {marker} but names none of {words}"
            )
            return []
    return [part.strip() for part in command.split("&&") if part.strip() not in RUN_BY_CI]


def environment() -> dict:
    """This process's environment with the training budget, the ``phylorl`` of this checkout on PATH."""
    env = dict(os.environ, PHYLORL_TRAIN_UPDATES=UPDATES, PYTHONUNBUFFERED="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def untracked(root: Path) -> set[str]:
    """Paths under ``root`` that git does not track (ignored ones included), one level deep."""
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=normal"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line[3:].rstrip("/") for line in listed.splitlines() if line[:2] in ("??", "!!")}


def check_run_dir(stdout: str, cwd: Path) -> None:
    """The run a ``phylorl train`` reports (its last stdout line) is complete: ended by its update budget,
    exit codes 0, a checkpoint, the report's PNGs, under ``cwd/runs/``."""
    shown = json.loads(stdout.strip().splitlines()[-1])
    run_dir = Path(shown["run_dir"])
    assert run_dir.is_absolute() and run_dir.parent == cwd.resolve() / "runs", run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reason"] == "updates done" and summary["updates"] == int(UPDATES), summary
    assert all(code == 0 for code in summary["exit_codes"].values()), summary["exit_codes"]
    assert (
        Path(summary["checkpoint"]).is_file()
        and Path(summary["checkpoint"]).parent == run_dir / "checkpoints"
    )
    for png in ("learning_curve.png", "update_latency.png", "throughput.png"):
        assert (run_dir / "report" / png).read_bytes()[:4] == b"\x89PNG"


def run_shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, (
        f"`{command}` exited {result.returncode} in {cwd}:\n{result.stderr[-3000:]}"
    )
    return result


def test_main_command_from_a_fresh_directory(tmp_path, need):
    """``phylorl train`` with no argument in a new empty directory: the default run directory is relative
    (``runs/<date-time>``), and every process the run starts (Redis changes into its data directory) still
    finds every file."""
    need("redis-server")
    result = run_shell("phylorl train", tmp_path)
    check_run_dir(result.stdout, tmp_path)


def test_every_documented_command_runs_from_the_repository_root(need):
    """Each command of README.md and docs/quickstart.md, in order (a later one may read what an earlier one
    wrote), from the repository's root; what they write there is removed afterwards."""
    need("redis-server")
    need("iqtree2")
    commands = [(path, kind, command) for path in DOCUMENTS for kind, command in documented(REPO / path)]
    assert any(c == "phylorl train" for _, kind, line in commands for c in runnable(line) if kind == "bash")
    before = untracked(REPO)
    try:
        for path, kind, line in commands:
            if kind == "python":
                result = subprocess.run(
                    [sys.executable, "-c", line],
                    cwd=REPO,
                    env=environment(),
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert result.returncode == 0, (
                    f"{path}'s python block failed:\n{line}\n{result.stderr[-3000:]}"
                )
                continue
            for command in runnable(line):
                result = run_shell(command, REPO)
                if command.startswith("phylorl train"):
                    check_run_dir(result.stdout, REPO)
    finally:
        for name in untracked(REPO) - before:
            target = REPO / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)


def test_markers_and_comments_are_read_as_written():
    """The reading itself: continued lines, comments outside quotes, ``&&``, the markers and what CI runs."""
    assert split_comment("phylorl search --out 'a #b.nwk'  # the agent") == (
        "phylorl search --out 'a #b.nwk'",
        "the agent",
    )
    assert runnable("bash scripts/install.sh && phylorl train   # the main job") == ["phylorl train"]
    assert runnable("phylorl train --device cuda  # [GPU] on a lent machine") == []
    with pytest.raises(AssertionError, match="marked"):
        runnable("phylorl train  # [GPU]")
    assert runnable("bash .ci/run") == []
