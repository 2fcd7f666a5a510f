"""A batch's tensors written into one flat byte buffer and read back as views of it.

The learner's feed processes (``services/learner/feed.py``) collate batches in processes of their own
and hand them over through buffers in shared memory: :func:`pack` writes every tensor of a
:class:`~phylorl.agent.batch.Batch` (or any nesting of dataclasses, tuples and lists of tensors)
into a ``uint8`` buffer and returns a small description (the structure, pickled, and where each
tensor lies); :func:`unpack` rebuilds the same object with its tensors as views of the buffer. Only
the description crosses a queue, so a batch of several MB costs one memory copy on each side.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass

import torch
from torch import Tensor

ALIGN = 64
"""Every tensor starts at a multiple of this many bytes (any element size divides it)."""


@dataclass(frozen=True)
class Packed:
    """Where a packed object's tensors lie in its buffer: the pickled structure (tensors replaced by their
    number) and per tensor ``(offset, dtype, shape)``; ``nbytes``: the buffer bytes used."""

    structure: bytes
    tensors: tuple[tuple[int, torch.dtype, tuple[int, ...]], ...]
    nbytes: int


class _Collector(pickle.Pickler):
    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.found: list[Tensor] = []

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            self.found.append(obj)
            return len(self.found) - 1
        return None


class _Rebuilder(pickle.Unpickler):
    def __init__(self, file, views: list[Tensor]):
        super().__init__(file)
        self.views = views

    def persistent_load(self, pid):
        return self.views[pid]


def packed_size(obj) -> tuple[bytes, list[Tensor], int]:
    """``(structure, tensors, nbytes)``: ``obj`` pickled with its tensors taken out, and the buffer bytes
    they need."""
    out = io.BytesIO()
    collector = _Collector(out)
    collector.dump(obj)
    at = 0
    for t in collector.found:
        at = _aligned(at) + t.numel() * t.element_size()
    return out.getvalue(), collector.found, at


def pack(obj, buffer: Tensor, sized: tuple[bytes, list[Tensor], int] | None = None) -> Packed:
    """Write every tensor of ``obj`` (CPU tensors) into ``buffer`` (a flat ``uint8`` CPU tensor); returns
    where they are. ``sized``: :func:`packed_size` of ``obj`` when the caller already has it. Raises
    ``ValueError`` when ``buffer`` is too small (the caller sizes it with :func:`packed_size`)."""
    structure, tensors, nbytes = sized if sized is not None else packed_size(obj)
    if buffer.dtype != torch.uint8 or buffer.dim() != 1:
        raise ValueError(f"the buffer must be a flat uint8 tensor, got {buffer.dtype} {tuple(buffer.shape)}")
    if nbytes > buffer.numel():
        raise ValueError(f"the batch needs {nbytes} bytes, the buffer holds {buffer.numel()}")
    where, at = [], 0
    for t in tensors:
        if t.device.type != "cpu":
            raise ValueError(f"only CPU tensors are packed, got one on {t.device}")
        at = _aligned(at)
        size = t.numel() * t.element_size()
        if size:
            buffer[at: at + size].copy_(t.contiguous().reshape(-1).view(torch.uint8))
        where.append((at, t.dtype, tuple(t.shape)))
        at += size
    return Packed(structure, tuple(where), nbytes)


def unpack(packed: Packed, buffer: Tensor):
    """The object :func:`pack` wrote, its tensors views of ``buffer`` (valid while the buffer is not
    written again: copy them out before handing the buffer back)."""
    views = []
    for at, dtype, shape in packed.tensors:
        size = _numel(shape) * _element_size(dtype)
        views.append(buffer[at: at + size].view(dtype).view(shape))
    return _Rebuilder(io.BytesIO(packed.structure), views).load()


def _aligned(at: int) -> int:
    return -(-at // ALIGN) * ALIGN


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _element_size(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()
