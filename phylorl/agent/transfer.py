"""A learner batch onto its device: packed into one host buffer, moved in one transfer, its moves expanded
there; and an update's results back to the host in one call.

On a GPU a :class:`Stager` packs a batch's tensors into one pinned buffer (a :class:`Block`), and
:func:`arrive` makes the device copy, its tensors' views and the expansion of its compact moves in one
compiled call. Each torch call made from Python lets the interpreter lock go and waits to take it back from
the learner's other threads, so the host work here is byte copies through memoryviews and one-call functions
(:mod:`phylorl.nets.one_call`).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import math
import pickle
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from phylorl.nets.compact_actions import TENSORS, CompactActions, action_batch, expand_actions, expand_tensors
from phylorl.nets.inputs import Batch, map_tensors, move_to
from phylorl.nets.one_call import one_call
from phylorl.records.collate import expand_on_host


def on_device(
    batch: Batch | Block,
    device: torch.device | str,
    pin_memory: bool = False,
    stager: Stager | None = None,
    consumer: torch.Stream | None = None,
) -> Batch:
    """``batch`` on ``device`` with its next actions expanded there when they are :class:`CompactActions`. A
    :class:`Block` (a batch packed in one host buffer), or a batch packed by ``stager`` on the way, goes to a
    CUDA device in one call (:func:`arrive`). ``consumer``: a CUDA stream other than the current one that will
    use the batch: its memory is marked for it (``record_stream``)."""
    device = torch.device(device)
    if stager is not None and device.type == "cuda" and isinstance(batch, Batch):
        batch = stager.stage(batch)
    if isinstance(batch, Block) and device.type == "cuda":  # one call, its moves expanded there (arrive)
        return batch.to(device, non_blocking=batch.pinned, consumer=consumer)
    batch = (
        move_to(batch.unpack(), device) if isinstance(batch, Block) else move_to(batch, device, pin_memory)
    )
    if isinstance(batch.next_actions, CompactActions):
        expand = expand_on_host if batch.reward.device.type == "cpu" else expand_actions
        batch = dataclasses.replace(batch, next_actions=expand(batch.next_actions))
    return mark_for(batch, consumer)


def mark_for(batch, consumer: torch.Stream | None):
    """``batch``, its memory marked for use on the ``consumer`` stream when one is given (``record_stream``,
    once per memory block: :func:`storages`)."""
    if consumer is not None:
        for tensor in storages(batch):
            tensor.record_stream(consumer)
    return batch


def storages(obj) -> list[torch.Tensor]:
    """One tensor of ``obj`` per memory block it uses (``record_stream`` of one view covers the block)."""
    found: dict[int, torch.Tensor] = {}
    map_tensors(obj, lambda t: (found.setdefault(t.untyped_storage().data_ptr(), t), t)[1])
    return list(found.values())


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
    """Pickles an object with its tensors taken out (each replaced by its number)."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.found: list[Tensor] = []

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            self.found.append(obj)
            return len(self.found) - 1
        return None


class _Rebuilder(pickle.Unpickler):  # the object back, its tensors the views given
    def __init__(self, file, views: list[Tensor]):
        super().__init__(file)
        self.views = views

    def persistent_load(self, pid):
        return self.views[pid]


@dataclass(frozen=True)
class Block:
    """A packed object in a host buffer ``data`` (``pinned`` for a fast transfer). ``typed``: the buffer's
    views per element type, kept by the :class:`Stager` that wrote it (made once per buffer)."""

    packed: Packed
    data: Tensor
    pinned: bool = False
    typed: dict | None = None

    def unpack(self):
        """The object, its tensors views of ``data``."""
        return unpack(self.packed, self.data)

    def to(
        self, device: torch.device | str, non_blocking: bool = False, consumer: torch.Stream | None = None
    ):
        """The object on ``device``: :func:`arrive`."""
        return arrive(self, torch.device(device), non_blocking, consumer)

    def typed_views(self, kinds: list[torch.dtype]) -> list[Tensor]:
        """``data`` viewed as each of ``kinds`` (the stager's, made once per buffer, where it has them)."""
        cache = self.typed if self.typed is not None else {}
        return [cache[k] if k in cache else cache.setdefault(k, _typed(self.data, k)) for k in kinds]


class Stager:
    """Packs host objects as :class:`Block` s into one buffer of its own (grown as needed; ``pinned``). One
    per thread: a block must have been used before the next :meth:`stage` writes the buffer again."""

    def __init__(self, pinned: bool = False):
        self.pinned = pinned
        self._buffer: Tensor | None = None
        self._views: dict = {}
        self._typed: dict = {}

    def stage(self, obj) -> Block:
        sized = packed_size(obj)
        buffer = self._fit(sized[2])
        return Block(pack(obj, buffer, sized), buffer, self.pinned, self._typed)

    def reserve(self, skeleton, sized: tuple[bytes, list[Tensor], int] | None = None) -> tuple[Block, list]:
        """A block laid out for ``skeleton`` (whose tensors only give shapes and dtypes, e.g. on ``meta``),
        nothing written: ``(block, arrays)``, ``arrays`` the numpy views where its tensors lie, in field
        order, for the caller to fill (made once per buffer and layout). ``sized``: :func:`packed_size` of
        ``skeleton`` when the caller keeps it."""
        structure, tensors, nbytes = sized if sized is not None else packed_size(skeleton)
        buffer = self._fit(nbytes)
        where = tuple(_layout(tensors)[0])
        key = (id(buffer), where)
        arrays = self._views.get(key)
        if arrays is None:
            if len(self._views) >= 64:
                self._views.clear()
            arrays = self._views[key] = [
                v.numpy() for v in unpack(Packed(b"", where, nbytes), buffer, structure=False)
            ]
        return Block(Packed(structure, where, nbytes), buffer, self.pinned, self._typed), arrays

    def _fit(self, nbytes: int) -> Tensor:
        if self._buffer is None or self._buffer.numel() < nbytes:
            self._buffer = torch.empty(
                aligned(int(nbytes * GROWTH) + ALIGN), dtype=torch.uint8, pin_memory=self.pinned
            )
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
    """Write every (CPU) tensor of ``obj`` into ``buffer`` (a flat ``uint8`` CPU tensor; ``ValueError`` when
    too small) through memoryviews; returns where they are. ``sized``: :func:`packed_size` of ``obj``."""
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
        src = byte_view(t.detach().numpy())
        dst[at : at + src.nbytes] = src
    return Packed(structure, tuple(where), nbytes)


def byte_view(array: np.ndarray) -> memoryview:
    """``array``'s bytes (C order) as a flat memoryview: assigned into another, one ``memcpy`` that keeps the
    interpreter lock (numpy's and torch's copies let it go, then wait to take it back)."""
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _layout(tensors: list[Tensor]) -> tuple[list[tuple[int, torch.dtype, tuple[int, ...]]], int]:
    """``(offset, dtype, shape)`` of each tensor and the bytes used: each aligned, those of one element type
    together (types in order of first use), so each type's tensors are one span of the buffer."""
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
    """The object :func:`pack` wrote, its tensors views of ``buffer`` made in one call (valid until the buffer
    is written again); ``structure=False``: only the list of views."""
    views = _land(Block(packed, buffer), buffer.device)[0]
    return rebuild(packed.structure, views) if structure else views


def rebuild(structure: bytes, views: list):
    """The object pickled as ``structure`` (:func:`pack`), its tensor ``i`` replaced by ``views[i]``."""
    return _Rebuilder(io.BytesIO(structure), views).load()


@dataclass(frozen=True)
class Plan:
    """A packed object's tensors as views per element type: ``kinds`` (in order of first use); per tensor its
    kind, count, shape and start (in elements) within its kind's ``span`` (its run of the buffer)."""

    kinds: list[torch.dtype]
    which: list[int]
    count: list[int]
    shapes: list[list[int]]
    span: list[tuple[int, int]]
    in_run: list[int]

    @staticmethod
    def of(packed: Packed) -> Plan:
        kinds = list(dict.fromkeys(dtype for _, dtype, _ in packed.tensors))
        which = [kinds.index(dtype) for _, dtype, _ in packed.tensors]
        start = [at // dtype.itemsize for at, dtype, _ in packed.tensors]
        count = [math.prod(shape) for _, _, shape in packed.tensors]
        ends = [
            (
                min((s for s, w in zip(start, which) if w == k), default=0),
                max((s + n for s, n, w in zip(start, count, which) if w == k), default=0),
            )
            for k in range(len(kinds))
        ]
        span = [(lo, hi - lo) for lo, hi in ends]
        shapes = [list(shape) for _, _, shape in packed.tensors]
        return Plan(kinds, which, count, shapes, span, [s - ends[w][0] for s, w in zip(start, which)])


def _typed(buffer: Tensor, kind: torch.dtype) -> Tensor:
    """A flat ``uint8`` buffer viewed as ``kind`` (its whole elements)."""
    n = buffer.numel()
    return (buffer if n % kind.itemsize == 0 else buffer.narrow(0, 0, n - n % kind.itemsize)).view(kind)


def aligned(at: int) -> int:
    """``at`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-at // ALIGN) * ALIGN


def arrive(
    block: Block, device: torch.device, non_blocking: bool = False, consumer: torch.Stream | None = None
):
    """The object packed in ``block`` on ``device`` in one call: its tensors views of one copy per element
    type, a top-level field holding :class:`CompactActions` replaced by its expansion (on the host device the
    views alias ``block.data``). ``non_blocking``: asynchronous copies (``block.data`` pinned and not written
    again before they are done); ``consumer``: a CUDA stream that will use the result."""
    found = _compact_fields(block.packed.structure)
    views, expanded = _land(block, device, non_blocking, consumer, found[1] if found else [])
    obj = rebuild(block.packed.structure, views)
    if found is None:
        return obj
    name, indices, uniform = found
    sizes = views[indices[TENSORS.index("sizes")]]
    return dataclasses.replace(obj, **{name: action_batch(*expanded, sizes, uniform)})


def _land(
    block: Block,
    device: torch.device,
    non_blocking: bool = False,
    consumer: torch.Stream | None = None,
    compact: list[int] | None = None,
) -> tuple[list[Tensor], list[Tensor]]:
    """``(views, expanded)`` of :func:`_arrive` for ``block`` (``compact``: the numbers of its compact moves'
    tensors, in :data:`TENSORS` order); on ``block.data``'s own device the views alias it."""
    p = Plan.of(block.packed)
    compact = compact or []
    moves = block.packed.tensors[compact[TENSORS.index("shared_row")]][2][0] if compact else 0
    views, expanded, _ = _arrival()(
        block.typed_views(p.kinds),
        [lo for lo, _ in p.span],
        [n for _, n in p.span],
        p.which,
        p.in_run,
        p.count,
        p.shapes,
        compact,
        moves,
        device,
        non_blocking,
        consumer,
    )
    return views, expanded


@functools.lru_cache(maxsize=64)
def _compact_fields(structure: bytes) -> tuple[str, list[int], int | None] | None:
    """``(field name, its tensors' numbers in :data:`TENSORS` order, its uniform)`` of the top-level
    dataclass field holding :class:`CompactActions` of the object pickled as ``structure``, else ``None``."""
    skeleton = rebuild(structure, range(sys.maxsize))  # tensor i stands as the number i
    if not dataclasses.is_dataclass(skeleton):
        return None
    for field in dataclasses.fields(skeleton):
        value = getattr(skeleton, field.name)
        if isinstance(value, CompactActions):
            return field.name, [getattr(value, name) for name in TENSORS], value.uniform
    return None


def _arrive(
    host: list[Tensor],
    first: list[int],
    elements: list[int],
    which: list[int],
    in_run: list[int],
    count: list[int],
    shapes: list[list[int]],
    compact: list[int],
    moves: int,
    device: torch.device,
    non_blocking: bool,
    consumer: torch.Stream | None,
) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """``(views, expanded, host)``: per tensor its view of its type's run of ``host`` copied to ``device``
    (``in_run``: its start there); the ``(nodes, meta, index)`` of the compact moves whose tensors are
    ``compact`` (none when empty); ``host``, kept to the end of the call (:mod:`~phylorl.nets.one_call`). The
    copies are marked for ``consumer`` when given."""
    copies: list[Tensor] = []
    for k in range(len(host)):
        copies.append(host[k].narrow(0, first[k], elements[k]).to(device, non_blocking=non_blocking))
    views: list[Tensor] = []
    for i in range(len(which)):
        views.append(copies[which[i]].narrow(0, in_run[i], count[i]).view(shapes[i]))
    expanded: list[Tensor] = []
    if len(compact) > 0:
        nodes, meta, index = expand_tensors([views[i] for i in compact], moves)
        expanded = [nodes, meta, index]
    if consumer is not None:
        for t in copies + expanded:
            t.record_stream(consumer)
    return views, expanded, host


@functools.cache
def _arrival():
    """:func:`_arrive` as one call (:func:`~phylorl.nets.one_call.one_call`, compiled on first use)."""
    return one_call(_arrive)


def to_host(values: Tensor, priorities: Tensor) -> Tensor:
    """``values`` then ``priorities`` (as ``values``' dtype) in one host tensor, in one call (one sync)."""
    return _gathered()(values, priorities)[0]


def split(both: Tensor, n_values: int) -> tuple[list, np.ndarray]:
    """``(values list, float32 priorities)`` of :func:`to_host`'s tensor (numpy views, no torch call)."""
    array = both.numpy()
    return array[:n_values].tolist(), array[n_values:].astype(np.float32, copy=False)


def _gather(values: Tensor, priorities: Tensor) -> tuple[Tensor, list[Tensor]]:
    """The host tensor, and the arguments (kept to the end of the call)."""
    both = torch.cat([values, priorities.to(values.dtype)])
    return both.to(torch.device("cpu")), [values, priorities]


@functools.cache
def _gathered():
    """:func:`_gather` as one call (compiled on first use)."""
    return one_call(_gather)
