"""Flags every sub-command spells the same way: alignments, and the single alignment some take."""

from __future__ import annotations

from pathlib import Path


def add_alignments(p, help_text: str, required: bool = True) -> None:
    """``--alignments PATH [PATH ...]`` (repeatable): files and/or directories of alignments, as every
    sub-command takes them; ``--alignment`` is the same flag."""
    p.add_argument("--alignments", "--alignment", dest="alignments", nargs="+", action="extend", metavar="PATH",
                   required=required, help=help_text)


def single_alignment(paths: list[str]) -> Path:
    """The one alignment file that ``paths`` name (a directory may hold exactly one)."""
    from phylorl.cli import CliError
    from phylorl.env.corpus import corpus_files

    files = corpus_files(paths)
    if len(files) != 1:
        raise CliError(f"this command takes one alignment; {' '.join(paths)} names {len(files)}")
    return files[0]
