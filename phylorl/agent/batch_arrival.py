"""A packed batch onto its device in one torch call: its bytes copied, its tensors' views made there, and its
compact moves expanded there.

A prefetch thread's batch comes as a :class:`~phylorl.agent.batch_transfer.Block` (its tensors in one host buffer).
Bringing it to the GPU was a chain of torch calls made from Python: the buffer sliced and copied, a view of the copy
per element type, the tensors' views, and the expansion of the compact moves
(:func:`~phylorl.nets.compact_actions.expand_actions`); each call lets the interpreter lock go and waits to take it
back from the learner's busy threads (:mod:`phylorl.nets.one_call`). Here it is one call of one compiled function:
each element type's run of the buffer (:func:`~phylorl.agent.batch_transfer._layout` keeps one type's tensors
together) is copied to the device from the host buffer's view as that type (made once per buffer by its
:class:`~phylorl.agent.batch_transfer.Stager`; TorchScript cannot reinterpret bytes itself), the tensors are views of
those copies, and the moves are expanded; Python then only rebuilds the object around the views (no torch call).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import torch
from torch import Tensor

from phylorl.agent.batch_transfer import Block, Plan, rebuild, tensor_views
from phylorl.nets.compact_actions import CompactActions, action_batch, expand_tensors
from phylorl.nets.one_call import one_call

COMPACT_TENSORS = tuple(f.name for f in dataclasses.fields(CompactActions) if f.name != "uniform")
"""The tensor fields of :class:`CompactActions`, in the order
:func:`~phylorl.nets.compact_actions.expand_tensors` takes them."""


def arrive(block: Block, device: torch.device, non_blocking: bool = False, consumer: torch.Stream | None = None):
    """The object packed in ``block`` on ``device``, its tensors views of one copy per element type, and a
    top-level field holding :class:`CompactActions` replaced by its expanded
    :class:`~phylorl.nets.inputs.ActionBatch` (as :func:`~phylorl.nets.compact_actions.expand_actions` gives it).
    ``non_blocking``: the copies are asynchronous (``block.data`` pinned, and not written again before the stream
    has done them). ``consumer``: a CUDA stream other than the current one that will use the result: its memory is
    marked for it (``record_stream``) in the same call. On the host device the views alias ``block.data``."""
    p = Plan.of(block.packed)
    found = _compact_fields(block.packed.structure)
    moves = 0
    if found is not None:
        moves = block.packed.tensors[found[1][COMPACT_TENSORS.index("shared_row")]][2][0]
    views, expanded, _ = _arrival()(block.typed_views(p.kinds), [lo for lo, _ in p.span], [n for _, n in p.span],
                                       p.which, p.in_run, p.count, p.shapes, found[1] if found else [], moves,
                                       device, non_blocking, consumer)
    obj = rebuild(block.packed.structure, views)
    if found is None:
        return obj
    name, indices, uniform = found
    sizes = views[indices[COMPACT_TENSORS.index("sizes")]]
    return dataclasses.replace(obj, **{name: action_batch(expanded[0], expanded[1], expanded[2], sizes, uniform)})


@functools.lru_cache(maxsize=64)
def _compact_fields(structure: bytes) -> tuple[str, list[int], int | None] | None:
    """``(field, indices, uniform)`` of the object pickled as ``structure`` when one of its top-level dataclass
    fields holds :class:`CompactActions`: that field's name, the numbers of its tensors (:data:`COMPACT_TENSORS`
    order) among the packed tensors, and its ``uniform``; else ``None``. Read once per structure (batches of one
    shape kind share it)."""
    skeleton = rebuild(structure, _Numbers())
    if not dataclasses.is_dataclass(skeleton):
        return None
    for field in dataclasses.fields(skeleton):
        value = getattr(skeleton, field.name)
        if isinstance(value, CompactActions):
            return field.name, [getattr(value, name) for name in COMPACT_TENSORS], value.uniform
    return None


class _Numbers:
    """Stands for a list of views: the view of tensor ``i`` is ``i``."""

    def __getitem__(self, i: int) -> int:
        return i


def _arrive(host: list[Tensor], first: list[int], elements: list[int], which: list[int], in_run: list[int],
            count: list[int], shapes: list[list[int]], compact: list[int], moves: int, device: torch.device,
            non_blocking: bool, consumer: Optional[torch.Stream]) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """``(views, expanded, host)``: per element type its run of ``host`` copied to ``device``; per tensor its view of
    its type's copy (``in_run``: its start there); the ``(nodes, meta, index)`` of the compact moves whose tensors
    are ``compact`` (none when empty); the copies and those marked for ``consumer`` when given. ``host`` is returned
    to keep it to the end (:mod:`~phylorl.nets.one_call`); the copies are not: made here, Python never holds them,
    and neither making nor dropping them takes the interpreter lock."""
    copies: list[Tensor] = []
    for k in range(len(host)):
        copies.append(host[k].narrow(0, first[k], elements[k]).to(device, non_blocking=non_blocking))
    views = tensor_views(copies, which, in_run, count, shapes)
    expanded: list[Tensor] = []
    if len(compact) > 0:
        c = compact
        nodes, meta, index = expand_tensors(views[c[0]], views[c[1]], views[c[2]], views[c[3]], views[c[4]],
                                            views[c[5]], views[c[6]], views[c[7]], views[c[8]], views[c[9]], moves)
        expanded = [nodes, meta, index]
    if consumer is not None:
        for t in copies + expanded:
            t.record_stream(consumer)
    return views, expanded, host


@functools.cache
def _arrival():
    """:func:`_arrive` as one call (:func:`~phylorl.nets.one_call.one_call`, compiled on first use)."""
    return one_call(_arrive)
