"""Flags every sub-command spells the same way: alignments, and the single alignment some take."""

from __future__ import annotations

from pathlib import Path


def add_alignments(p, help_text: str, required: bool = True) -> None:
    """``--alignments PATH [PATH ...]`` (repeatable): files and/or directories of alignments, as every
    sub-command takes them; ``--alignment`` is the same flag."""
    p.add_argument(
        "--alignments",
        "--alignment",
        dest="alignments",
        nargs="+",
        action="extend",
        metavar="PATH",
        required=required,
        help=help_text,
    )


def single_alignment(paths: list[str]) -> Path:
    """The one alignment file that ``paths`` name (a directory may hold exactly one)."""
    from phylorl.cli import CliError
    from phylorl.env.corpus import corpus_files

    files = corpus_files(paths)
    if len(files) != 1:
        raise CliError(f"this command takes one alignment; {' '.join(paths)} names {len(files)}")
    return files[0]


def add_rescore(p) -> None:
    """``--rescore K``: how a search of a fixed number of moves (agent, random, greedy) chooses its answer
    (:data:`phylorl.env.search.RESCORE` when not given; the module is not imported here, to keep ``--help``
    light)."""
    p.add_argument(
        "--rescore",
        type=int,
        default=None,
        metavar="K",
        help="agent, random, greedy: answer with the best, after three Newton passes over every branch, of "
        "the K distinct trees of highest step log-likelihood seen; 0: the best by step "
        "log-likelihood alone (default: 64)",
    )


def rescore_value(value: int | None) -> int:
    """``--rescore`` checked, its default filled in."""
    from phylorl.cli import CliError
    from phylorl.env.search import RESCORE

    if value is not None and value < 0:
        raise CliError(f"--rescore must be >= 0, got {value}")
    return RESCORE if value is None else value
