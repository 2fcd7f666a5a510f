"""Where a run's checkpoints are: ``learner-<version>.pt`` files and a ``latest`` file naming the newest
(written by the learner service, read by it on resume, by ``phylorl train``'s summary and by every command
that takes a run directory as ``--checkpoint``). No torch here: the launcher reads it too."""

from __future__ import annotations

import os
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
"""Where the shipped agent lives (``models/`` at the top of the repository)."""

DEFAULT_CHECKPOINT = MODELS_DIR / "agent.pt"
"""The shipped agent's checkpoint: used by ``phylorl search --policy agent`` and ``phylorl eval``
when no ``--checkpoint`` is given."""

LATEST = "latest"
"""Name of the file, next to a run's checkpoints, that names the newest one."""


def latest_checkpoint(directory: str | os.PathLike) -> Path | None:
    """The checkpoint that ``directory/latest`` names (``None`` without one); ``FileNotFoundError`` when
    it names a file that does not exist."""
    pointer = Path(directory) / LATEST
    if not pointer.is_file():
        return None
    target = pointer.parent / pointer.read_text().strip()
    if not target.is_file():
        raise FileNotFoundError(f"{pointer} names {target.name!r}, which does not exist")
    return target
