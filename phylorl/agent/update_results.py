"""An update's results (its metric values and priorities) brought to the host in one torch call, and read there
without another.

The learner reads each update's values and priorities as one host tensor (its one device sync, or with pipelined
updates an asynchronous copy read one launch later). Made from Python, that was a dtype cast, a concatenation and a
copy, then a slice for each part: five calls, each letting the interpreter lock go and waiting to take it back behind
the learner process's busy threads (the endpoint's, the prefetch threads: :mod:`phylorl.nets.one_call`). Here the
device side is one compiled call and the host side numpy's.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor

from phylorl.nets.one_call import one_call


def to_host(values: Tensor, priorities: Tensor, non_blocking: bool = False) -> Tensor:
    """``values`` then ``priorities`` (as ``values``' dtype) in one host tensor. ``non_blocking`` (from a GPU): the
    copy is asynchronous, into pinned memory; read it once the stream has done it (an event recorded after)."""
    both, _ = _gathered()(values, priorities, non_blocking)
    return both


def split(both: Tensor, n_values: int) -> tuple[list, np.ndarray]:
    """``(values list, float32 priorities)`` of :func:`to_host`'s tensor (numpy views, no torch call)."""
    array = both.numpy()
    return array[:n_values].tolist(), array[n_values:].astype(np.float32, copy=False)


def _gather(values: Tensor, priorities: Tensor, non_blocking: bool) -> tuple[Tensor, list[Tensor]]:
    """The host tensor, and the arguments (kept to the end of the call: :mod:`~phylorl.nets.one_call`)."""
    both = torch.cat([values, priorities.to(values.dtype)])
    return both.to(torch.device("cpu"), non_blocking=non_blocking), [values, priorities]


@functools.cache
def _gathered():
    """:func:`_gather` as one call (compiled on first use)."""
    return one_call(_gather)
