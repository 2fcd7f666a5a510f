"""Reductions over variable-size segments (the nodes of each tree, the actions of each state).

Rows of a flat tensor belong to consecutive segments, in order. When every segment has the same size (trees of
one alignment), ``Segments.size`` is that size and the reductions reshape to ``[count, size, ...]`` instead of
scattering (faster, static shapes).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Segments:
    """Which segment each row of a flat tensor belongs to.

    ``index``  int64 ``[L]``: segment of each row (non-decreasing).
    ``sizes``  int64 ``[count]``: rows per segment (may be 0).
    ``count``  number of segments.
    ``size``   rows per segment when all segments have the same size, else ``None``.
    """

    index: Tensor
    sizes: Tensor
    count: int
    size: int | None

    @property
    def uniform(self) -> bool:
        return self.size is not None


def segment_sum(x: Tensor, seg: Segments) -> Tensor:
    """Sum of rows per segment: ``[L, *D] -> [count, *D]`` (0 for an empty segment)."""
    if seg.uniform:
        return x.reshape(seg.count, seg.size, *x.shape[1:]).sum(1)
    out = x.new_zeros((seg.count, *x.shape[1:]))
    return out.index_add(0, seg.index, x)


def segment_mean(x: Tensor, seg: Segments) -> Tensor:
    """Mean of rows per segment: ``[L, *D] -> [count, *D]`` (0 for an empty segment)."""
    if seg.uniform:
        return x.reshape(seg.count, seg.size, *x.shape[1:]).mean(1)
    total = segment_sum(x, seg)
    n = seg.sizes.clamp(min=1).to(x.dtype).reshape(-1, *([1] * (x.dim() - 1)))
    return total / n


def segment_max(x: Tensor, seg: Segments) -> Tensor:
    """Maximum of rows per segment: ``[L, *D] -> [count, *D]`` (``-inf`` for an empty segment)."""
    if seg.uniform:
        return x.reshape(seg.count, seg.size, *x.shape[1:]).amax(1)
    out = x.new_full((seg.count, *x.shape[1:]), float("-inf"))
    idx = seg.index.reshape(-1, *([1] * (x.dim() - 1))).expand_as(x)
    return out.scatter_reduce(0, idx, x, reduce="amax", include_self=True)


def segment_logsumexp(x: Tensor, seg: Segments) -> Tensor:
    """``log sum exp`` of a 1-D tensor per segment, stable (max subtracted first): ``[L] -> [count]``
    (``-inf`` for an empty segment)."""
    if seg.uniform:
        return torch.logsumexp(x.reshape(seg.count, seg.size), dim=1)
    m = segment_max(x, seg).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = segment_sum(torch.exp(x - take(m, seg.index)), seg)
    return m + torch.log(s)


def segment_log_softmax(x: Tensor, seg: Segments) -> Tensor:
    """``x - logsumexp(x)`` within each row's segment: ``[L] -> [L]``."""
    if seg.uniform:
        return torch.log_softmax(x.reshape(seg.count, seg.size), dim=1).reshape(-1)
    return x - take(segment_logsumexp(x, seg), seg.index)


def segment_argmax(x: Tensor, seg: Segments) -> Tensor:
    """Position of the maximum *within* each (non-empty) segment, the first on ties: ``[L] -> [count]``."""
    if seg.uniform:
        return x.reshape(seg.count, seg.size).argmax(1)
    starts = torch.cumsum(seg.sizes, 0) - seg.sizes
    m = segment_max(x, seg)
    pos = torch.arange(x.shape[0], device=x.device)
    big = torch.full_like(pos, x.shape[0])
    first = torch.where(x == m[seg.index], pos, big)
    out = torch.full((seg.count,), x.shape[0], dtype=pos.dtype, device=x.device)
    out = out.scatter_reduce(0, seg.index, first, reduce="amin", include_self=True)
    return out - starts


def take(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` for an integer ``index`` of any shape (``[R, *D]``, ``[*I] -> [*I, *D]``), as
    ``index_select``, whose backward (an ``index_add``: no sort, no host sync) can be captured in a CUDA
    graph."""
    return x.index_select(0, index.reshape(-1)).reshape(*index.shape, *x.shape[1:])


def segments_from_sizes(sizes: Tensor, size: int | None = None, rows: int | None = None) -> Segments:
    """:class:`Segments` for consecutive segments of the given sizes (int64 ``[count]``); ``rows``: their sum,
    when known (no host sync)."""
    index = torch.repeat_interleave(
        torch.arange(sizes.shape[0], device=sizes.device), sizes, output_size=rows
    )
    return Segments(index=index, sizes=sizes, count=int(sizes.shape[0]), size=size)
