"""What several sub-commands share: flags spelled the same way, and the checks and loading behind them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from phylorl.cli import CliError


def default_cache_dir() -> Path:
    """The preparation cache of ``phylorl search``, ``eval`` and ``train`` (keyed by content
    and model): ``$XDG_CACHE_HOME/phylorl/prepared``, or ``~/.cache/phylorl/prepared``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "phylorl" / "prepared"


def status(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def add_alignments(p, help_text: str) -> None:
    """``--alignments PATH [PATH ...]`` (repeatable): files and/or directories of alignments, as every
    sub-command takes them; ``--alignment`` is the same flag."""
    names = ("--alignments", "--alignment")
    p.add_argument(*names, nargs="+", action="extend", metavar="PATH", required=True, help=help_text)


def add_model(p, help_text: str = "model string; free parameters are estimated on the NJ tree") -> None:
    p.add_argument("--model", default="GTR+F+G4", help=help_text)


def add_agent(p, prefix: str = "") -> None:
    """``--checkpoint``, ``--tabu K`` and ``--rescore K``: the agent a search uses and how it chooses its
    answer (defaults filled in by :func:`load_agent` and the commands, ``--rescore``'s
    :data:`phylorl.env.search.RESCORE`; nothing heavy is imported here, to keep ``--help`` light)."""
    p.add_argument(
        "--checkpoint",
        help=f"{prefix}learner checkpoint file or training run directory (default: models/agent.pt, the "
        "shipped agent)",
    )
    p.add_argument(
        "--tabu",
        type=int,
        metavar="K",
        help=f"{prefix}pass over at most K of the agent's best moves to avoid a tree already visited in the "
        "same search; 0: plain greedy (default: 20)",
    )
    p.add_argument(
        "--rescore",
        type=int,
        metavar="K",
        help="agent, random, greedy: answer with the best, after three Newton passes over every branch, of "
        "the K distinct trees of highest step log-likelihood seen; 0: the best by step "
        "log-likelihood alone (default: 64)",
    )


def check(*rules: tuple[object, str]) -> None:
    """``rules``: ``(failed, message)`` pairs, checked in order; the first that failed is a one-line error."""

    for failed, message in rules:
        if failed:
            raise CliError(message)


def at_least(args, **minimums: int) -> list[tuple[bool, str]]:
    """:func:`check` rules, one per ``FLAG=MINIMUM``: ``--FLAG`` given and below ``MINIMUM``."""
    return [
        (value is not None and value < low, f"--{flag.replace('_', '-')} must be >= {low}, got {value}")
        for flag, low in minimums.items()
        for value in [getattr(args, flag)]
    ]


def single_alignment(paths: list[str]) -> Path:
    """The one alignment file that ``paths`` name (a directory may hold exactly one)."""
    from phylorl.env.corpus import corpus_files

    files = corpus_files(paths)
    if len(files) != 1:
        raise CliError(f"this command takes one alignment; {' '.join(paths)} names {len(files)}")
    return files[0]


def agent_checkpoint(checkpoint: str | None, hint: str = "") -> str | Path:
    """``--checkpoint``, or the shipped agent's when none is given; a missing one is a one-line error
    (``hint`` ends the message of a missing default)."""
    from phylorl.agent.checkpoints import DEFAULT_CHECKPOINT

    if checkpoint is None:
        if not Path(DEFAULT_CHECKPOINT).exists():
            raise CliError(
                f"no agent checkpoint at {DEFAULT_CHECKPOINT} (the default): pass --checkpoint PATH{hint}"
            )
        return DEFAULT_CHECKPOINT
    if not Path(checkpoint).exists():
        raise CliError(f"checkpoint '{checkpoint}' does not exist")
    return checkpoint


def load_agent(checkpoint: str | Path, tabu: int | None):
    """The agent policy of ``checkpoint`` with ``--tabu`` or its default."""
    from phylorl.agent.policy import DEFAULT_TABU, AgentPolicy

    return AgentPolicy.from_checkpoint(checkpoint, tabu=DEFAULT_TABU if tabu is None else tabu)
