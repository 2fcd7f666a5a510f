"""A batch's tensors written into one flat byte buffer and read back as views of it.

:func:`pack` writes every tensor of a :class:`~phylorl.agent.batch.Batch` (or any nesting of dataclasses,
tuples and lists of tensors) into a ``uint8`` buffer and returns a small description (the structure, pickled, and
where each tensor lies); :func:`unpack` rebuilds the same object with its tensors as views of the buffer. Two
uses: the learner's feed processes (``services/learner/feed.py``) hand batches over through buffers in shared
memory, only the description crossing a queue; and a batch goes to the GPU as one :class:`Block` (one pinned
buffer, one transfer, :class:`Stager`) instead of a pinned copy and a transfer per tensor.
"""

from __future__ import annotations

import functools
import io
import math
import pickle
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from phylorl.nets.one_call import one_call

ALIGN = 64
"""Every tensor starts at a multiple of this many bytes (any element size divides it)."""
GROWTH = 1.25
"""A buffer is made this much larger than the object that first needs it (later batches vary in size)."""


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


@dataclass(frozen=True)
class Block:
    """A packed object in a host buffer ``data`` (where :func:`pack` wrote it; ``pinned`` when that buffer is, for
    a fast transfer). ``typed``: the buffer's views per element type, kept by the :class:`Stager` that wrote it
    (made once per buffer instead of once per block)."""

    packed: Packed
    data: Tensor
    pinned: bool = False
    typed: dict | None = None

    def unpack(self):
        """The object, its tensors views of ``data``."""
        return unpack(self.packed, self.data)

    def to(self, device: torch.device | str, non_blocking: bool = False, consumer: torch.Stream | None = None):
        """The object on ``device`` (:func:`~phylorl.agent.batch_arrival.arrive`: one call; compact moves expanded
        there; its memory marked for the ``consumer`` stream). With ``non_blocking`` (``pinned``) the copy is
        asynchronous: ``data`` must not be written again before the stream has done it."""
        from phylorl.agent.batch_arrival import arrive

        return arrive(self, torch.device(device), non_blocking, consumer)

    def typed_views(self, kinds: list[torch.dtype]) -> list[Tensor]:
        """``data`` viewed as each of ``kinds`` (the stager's, made once per buffer, where it has them)."""
        cache = self.typed if self.typed is not None else {}
        return [cache[k] if k in cache else cache.setdefault(k, _typed(self.data, k)) for k in kinds]


class Stager:
    """Packs host objects into one buffer of its own (grown as needed: a new buffer, ``GROWTH`` times the object
    that needed it) as :class:`Block` s: pinned for a fast transfer to a GPU, or in shared memory for another
    process. One per thread: a block must have been used (copied, its stream synchronised) before the next
    :meth:`stage` writes the buffer again."""

    def __init__(self, pinned: bool = False, shared: bool = False):
        self.pinned = pinned
        self.shared = shared
        self._buffer: Tensor | None = None
        self._views: dict = {}
        self._typed: dict = {}

    def stage(self, obj) -> Block:
        sized = packed_size(obj)
        buffer = self._fit(sized[2])
        return Block(pack(obj, buffer, sized), buffer, self.pinned, self._typed)

    def copy(self, packed: Packed, source: Tensor) -> Block:
        """A block of this stager's buffer holding ``packed``'s bytes copied from ``source`` (another buffer: a feed
        process's, in shared memory), through memoryviews, holding the interpreter lock (:func:`byte_view`)."""
        buffer = self._fit(packed.nbytes)
        memoryview(buffer.numpy())[: packed.nbytes] = memoryview(source.numpy())[: packed.nbytes]
        return Block(packed, buffer, self.pinned, self._typed)

    def reserve(self, skeleton, sized: tuple[bytes, list[Tensor], int] | None = None) -> tuple[Block, list]:
        """A block laid out for ``skeleton`` (an object whose tensors only give shapes and dtypes: e.g. on the
        ``meta`` device), nothing written: ``(block, arrays)``, ``arrays`` the numpy views of the buffer where its
        tensors lie, in field order, for the caller to fill. ``sized``: :func:`packed_size` of ``skeleton`` when the
        caller keeps it. The views of a layout are made once per buffer."""
        structure, tensors, nbytes = sized if sized is not None else packed_size(skeleton)
        buffer = self._fit(nbytes)
        where = tuple(_layout(tensors)[0])
        key = (id(buffer), where)
        arrays = self._views.get(key)
        if arrays is None:
            if len(self._views) >= 64:
                self._views.clear()
            arrays = self._views[key] = [v.numpy() for v in unpack(Packed(b"", where, nbytes), buffer, structure=False)]
        return Block(Packed(structure, where, nbytes), buffer, self.pinned, self._typed), arrays

    def _fit(self, nbytes: int) -> Tensor:
        if self._buffer is None or self._buffer.numel() < nbytes:
            buffer = torch.empty(aligned(int(nbytes * GROWTH) + ALIGN), dtype=torch.uint8, pin_memory=self.pinned)
            self._buffer = buffer.share_memory_() if self.shared else buffer
            self._views = {}
            self._typed = {}
        return self._buffer


def packed_size(obj) -> tuple[bytes, list[Tensor], int]:
    """``(structure, tensors, nbytes)``: ``obj`` pickled with its tensors taken out, and the buffer bytes
    they need."""
    out = io.BytesIO()
    collector = _Collector(out)
    collector.dump(obj)
    return out.getvalue(), collector.found, _layout(collector.found)[1]


def pack(obj, buffer: Tensor, sized: tuple[bytes, list[Tensor], int] | None = None) -> Packed:
    """Write every tensor of ``obj`` (CPU tensors) into ``buffer`` (a flat ``uint8`` CPU tensor); returns
    where they are. ``sized``: :func:`packed_size` of ``obj`` when the caller already has it. Raises
    ``ValueError`` when ``buffer`` is too small (the caller sizes it with :func:`packed_size`).

    The bytes are copied through memoryviews, holding the interpreter lock throughout (:func:`byte_view`): a torch
    copy per tensor let the lock go some hundred times a batch (each slice, view and copy), and in the learner,
    beside its busy threads, each time waited to take it back: 0.47 ms a design-size batch alone on the development
    EPYC, 18–26 ms beside one busy Python thread at the learner's 0.5 ms switch interval (session 23; on an H200 in
    the running system 43% of each prefetch thread's time)."""
    structure, tensors, nbytes = sized if sized is not None else packed_size(obj)
    if buffer.dtype != torch.uint8 or buffer.dim() != 1:
        raise ValueError(f"the buffer must be a flat uint8 tensor, got {buffer.dtype} {tuple(buffer.shape)}")
    if nbytes > buffer.numel():
        raise ValueError(f"the batch needs {nbytes} bytes, the buffer holds {buffer.numel()}")
    where = _layout(tensors)[0]
    for t in tensors:
        if t.device.type != "cpu":
            raise ValueError(f"only CPU tensors are packed, got one on {t.device}")
    dst = memoryview(buffer.numpy())
    for t, (at, _, _) in zip(tensors, where):
        src = byte_view(_host_array(t))
        dst[at: at + src.nbytes] = src
    return Packed(structure, tuple(where), nbytes)


def _host_array(t: Tensor) -> np.ndarray:
    """A CPU tensor's elements as a numpy array (its bytes, for the element types numpy lacks)."""
    if t.requires_grad:
        t = t.detach()
    if t.dtype in _NOT_IN_NUMPY:
        return t.contiguous().reshape(-1).view(torch.uint8).numpy()
    return t.numpy()


_NOT_IN_NUMPY = {torch.bfloat16, torch.complex32, *(getattr(torch, name) for name in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz") if hasattr(torch, name))}


def byte_view(array: np.ndarray) -> memoryview:
    """``array``'s bytes (C order) as a flat memoryview: assigning it into another memoryview is one ``memcpy``
    that keeps the interpreter lock (numpy's and torch's copies let it go, and then wait to take it back)."""
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _layout(tensors: list[Tensor]) -> tuple[list[tuple[int, torch.dtype, tuple[int, ...]]], int]:
    """``(offset, dtype, shape)`` of each tensor (in their order) and the bytes used: laid out from offset 0, each
    aligned, those of one element type together (types in order of first use), so that each type's tensors are one
    span of the buffer (:class:`Plan`)."""
    kinds: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        kinds.setdefault(t.dtype, []).append(i)
    where: list = [None] * len(tensors)
    at = 0
    for members in kinds.values():
        for i in members:
            t = tensors[i]
            at = aligned(at)
            where[i] = (at, t.dtype, tuple(t.shape))
            at += t.numel() * t.element_size()
    return where, at


def unpack(packed: Packed, buffer: Tensor, structure: bool = True):
    """The object :func:`pack` wrote, its tensors views of ``buffer`` (valid while the buffer is not
    written again: copy them out before handing the buffer back). ``structure=False``: only the list of views.

    The views are made in one call (:func:`_views`), from one view of the buffer per element type: made one by
    one from Python they were two torch calls a tensor, each letting the interpreter lock go
    (:mod:`phylorl.nets.one_call`)."""
    p = Plan.of(packed)
    views, _ = _views()([_typed(buffer, k) for k in p.kinds], p.which, p.start, p.count, p.shapes)
    return rebuild(packed.structure, views) if structure else views


def rebuild(structure: bytes, views: list):
    """The object pickled as ``structure`` (:func:`pack`), its tensors ``views[i]`` (anything, for each ``i``)."""
    return _Rebuilder(io.BytesIO(structure), views).load()


@dataclass(frozen=True)
class Plan:
    """A packed object's tensors as views of the buffer per element type: ``kinds`` the types (in order of first
    use); per tensor ``which`` kind, ``start`` (in elements of that kind), ``count`` and ``shapes``; per kind
    ``span``: ``(first, elements)``, the one run of the buffer its tensors lie in (:func:`_layout`); per tensor
    ``in_run``, its start within its kind's run."""

    kinds: list[torch.dtype]
    which: list[int]
    start: list[int]
    count: list[int]
    shapes: list[list[int]]
    span: list[tuple[int, int]]
    in_run: list[int]

    @staticmethod
    def of(packed: Packed) -> "Plan":
        kinds: list[torch.dtype] = []
        which, start, count, shapes = [], [], [], []
        for at, dtype, shape in packed.tensors:
            if dtype not in kinds:
                kinds.append(dtype)
            which.append(kinds.index(dtype))
            start.append(at // dtype.itemsize)
            count.append(math.prod(shape))
            shapes.append(list(shape))
        ends = [(min((s for s, w in zip(start, which) if w == k), default=0),
                 max((s + n for s, n, w in zip(start, count, which) if w == k), default=0)) for k in range(len(kinds))]
        return Plan(kinds, which, start, count, shapes, [(lo, hi - lo) for lo, hi in ends],
                    [s - ends[w][0] for s, w in zip(start, which)])


def _typed(buffer: Tensor, kind: torch.dtype) -> Tensor:
    """A flat ``uint8`` buffer viewed as ``kind`` (its whole elements)."""
    n = buffer.numel()
    return (buffer if n % kind.itemsize == 0 else buffer.narrow(0, 0, n - n % kind.itemsize)).view(kind)


def tensor_views(typed: list[Tensor], which: list[int], start: list[int], count: list[int],
                 shapes: list[list[int]]) -> list[Tensor]:
    """Per tensor ``typed[which].narrow(0, start, count)`` viewed as ``shape`` (TorchScript: called inside the
    one-call functions, here and in :mod:`~phylorl.agent.batch_arrival`)."""
    out: list[Tensor] = []
    for i in range(len(which)):
        out.append(typed[which[i]].narrow(0, start[i], count[i]).view(shapes[i]))
    return out


def _views_kept(typed: list[Tensor], which: list[int], start: list[int], count: list[int],
                shapes: list[list[int]]) -> tuple[list[Tensor], list[Tensor]]:
    """:func:`tensor_views`, and ``typed`` (kept to the end: :mod:`~phylorl.nets.one_call`)."""
    return tensor_views(typed, which, start, count, shapes), typed


@functools.cache
def _views():
    """:func:`_views_kept` as one call (:func:`~phylorl.nets.one_call.one_call`, compiled on first use)."""
    return one_call(_views_kept)


def aligned(at: int) -> int:
    """``at`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-at // ALIGN) * ALIGN
