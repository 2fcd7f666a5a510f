"""Process-wide allocator tuning for services that move megabyte messages.

glibc returns freed memory to the OS eagerly and serves large blocks from fresh mmaps, so every megabyte
buffer (a Redis reply, a gRPC message) is paged in again: on some virtual machines a page fault costs more
than copying the page. Call once at start-up, from ``__main__`` only.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's ceiling on 64-bit (HEAP_MAX_SIZE / 2)
KEEP_MB = 1024
"""Freed memory the replay service and the learner let glibc keep for reuse (MiB): a batch's arrays then reuse
pages instead of faulting them in anew."""


def keep_freed_memory(megabytes: int = KEEP_MB) -> bool:
    """Let glibc keep up to ``megabytes`` MiB of freed memory; False when not on glibc or not asked."""
    if megabytes <= 0:
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    trim = min(megabytes * 1024 * 1024, 2**31 - 1)
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))
