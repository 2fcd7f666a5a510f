"""Training corpora: the alignments an agent is trained on.

A corpus is given as a path or a list of paths; a directory stands for every alignment file directly
inside it (extensions in :data:`ALIGNMENT_SUFFIXES`, sorted by name; other files such as the ``.nwk``
and ``.json`` written by ``phylorl simulate`` are ignored), a file for itself (whatever its
extension). Files that cannot be read as alignments make :func:`load_corpus` fail with a
:class:`CorpusError` naming every one of them, unless the caller asks to skip them
(``skip_unreadable=True``); skipped files are listed in :attr:`Corpus.skipped` for the caller to report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np

from phylorl.phylo.alignment import Alignment, AlignmentError, load_alignment

ALIGNMENT_SUFFIXES = (".fasta", ".fa", ".fas", ".fna", ".phy", ".phylip", ".nex", ".nexus", ".nxs")
"""File extensions (case-insensitive) taken from a corpus directory."""


class CorpusError(ValueError):
    """A corpus that cannot be used: a missing path, unreadable files (each named), or no alignment."""


@dataclass(frozen=True)
class CorpusEntry:
    """One alignment of a corpus and the file it came from."""

    path: Path
    alignment: Alignment


@dataclass
class Corpus:
    """The readable alignments of a corpus, in load order, and the files skipped on the way."""

    entries: list[CorpusEntry]
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    """``(path, message)`` for each unreadable file skipped (only with ``skip_unreadable=True``)."""

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> CorpusEntry:
        return self.entries[index]

    def __iter__(self):
        return iter(self.entries)

    def sample(self, rng: np.random.Generator) -> CorpusEntry:
        """An entry drawn uniformly with ``rng``."""
        return self.entries[int(rng.integers(len(self.entries)))]


def corpus_files(paths: str | PathLike | list) -> list[Path]:
    """The files a corpus specification stands for, in order, each once (see module docstring).

    Raises :class:`CorpusError` for a path that does not exist.
    """
    if isinstance(paths, (str, PathLike)):
        paths = [paths]
    files: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            files += sorted(
                p for p in path.iterdir() if p.is_file() and p.suffix.lower() in ALIGNMENT_SUFFIXES
            )
        elif path.exists():
            files.append(path)
        else:
            raise CorpusError(f"corpus path {str(path)!r} does not exist")
    unique: dict[Path, Path] = {}  # each file once, where it first appears
    for path in files:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def load_corpus(paths: str | PathLike | list, *, skip_unreadable: bool = False, min_taxa: int = 4) -> Corpus:
    """Read every alignment of a corpus (directories and/or files, see module docstring).

    ``min_taxa``: alignments with fewer taxa count as unreadable. Raises :class:`CorpusError` listing
    every unreadable file with its error, one per line, unless ``skip_unreadable`` (then they are
    in :attr:`Corpus.skipped`); also when no alignment remains.
    """
    files = corpus_files(paths)
    entries, bad = [], []
    for path in files:
        try:
            entries.append(CorpusEntry(path, load_alignment(path, min_taxa=min_taxa)))
        except AlignmentError as err:
            message = str(err)
            bad.append((path, message if message.startswith(str(path)) else f"{path}: {message}"))
    if bad and not skip_unreadable:
        lines = "\n".join(f"  {message}" for _, message in bad)
        raise CorpusError(
            f"{len(bad)} of {len(files)} corpus file(s) cannot be read (skip them with skip_unreadable / "
            f"--skip-unreadable):\n{lines}"
        )
    if not entries:
        where = ", ".join(repr(str(p)) for p in ([paths] if isinstance(paths, (str, PathLike)) else paths))
        detail = f"; all {len(bad)} file(s) were unreadable" if bad else ""
        raise CorpusError(
            f"the corpus {where} holds no alignment (files ending in {', '.join(ALIGNMENT_SUFFIXES)}){detail}"
        )
    return Corpus(entries, bad)
