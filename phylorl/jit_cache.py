"""Where numba keeps phylorl's compiled kernels: a directory named by a digest of the package's source.

numba's on-disk cache (``cache=True``) checks only the file that defines a function. A kernel that calls
kernels from other modules (the record pass calls the walk, the parsimony columns and the record reader) keeps
its old compiled code when only those modules change, as after a ``git pull`` that leaves its own file alone:
the stale code then runs with the new callers' argument layouts, which gives wrong arrays or corrupts memory
(numba issues #1833 and #9483). Keying the whole cache by the source of every module that uses numba makes any
change to a kernel start a fresh cache (a cold compile, about a minute for the record passes). The entry
points call :func:`use_source_keyed_cache` before they import a kernel; nothing happens on import of this
module.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV = "NUMBA_CACHE_DIR"


def source_digest(root: Path | None = None) -> str:
    """A digest of the ``.py`` files under ``root`` (the phylorl package) that use numba (names and contents):
    the compiled kernels and the modules whose constants they compile in (they import numba too). An edit
    elsewhere (the command line, the networks, the services) keeps the compiled kernels."""
    root = Path(__file__).resolve().parent if root is None else Path(root)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def default_base() -> Path:
    """``$XDG_CACHE_HOME/phylorl/numba`` (``~/.cache/phylorl/numba`` without it)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "phylorl" / "numba"


COMPILED_MARKER = "compiled"
"""A file in a cache directory that says every kernel a first command uses is in it
(``scripts/compile_kernels.py`` writes it after running those commands once)."""


def cache_dir() -> Path | None:
    """The directory numba caches compiled kernels in for this process (``None`` before
    :func:`use_source_keyed_cache` or a ``NUMBA_CACHE_DIR`` says where)."""
    path = os.environ.get(ENV)
    return Path(path) if path else None


def is_compiled() -> bool:
    """Whether this version's kernels were all compiled into the cache (:data:`COMPILED_MARKER`)."""
    path = cache_dir()
    return path is not None and (path / COMPILED_MARKER).is_file()


def use_source_keyed_cache(base: Path | None = None, root: Path | None = None) -> Path | None:
    """Point numba's cache at ``base/<source digest>`` for this process and the processes it starts, unless
    ``NUMBA_CACHE_DIR`` is set already (the image sets it; a user may): then nothing changes and ``None`` is
    returned. Call it before importing any module with compiled kernels: a function takes its cache directory
    when it is defined."""
    if os.environ.get(ENV):
        return None
    path = (default_base() if base is None else Path(base)) / source_digest(root)
    os.environ[ENV] = str(path)
    from numba.core import config  # numba reads the variable when it is imported; it may be imported already

    config.CACHE_DIR = str(path)
    return path
