"""Every move of many states in compact form: slot tables and a few numbers per move, expanded where the
network runs.

A move ``(p, s, x, y)`` prunes the subtree on ``s``'s side of edge ``(p, s)`` and regrafts it onto edge ``(x,
y)``. Most of its features depend on one side only: the pruned slot ``(p, k)`` with ``s = neighbors[p, k]``,
or the regraft slot ``(x, j)`` with ``y = neighbors[x, j]``; the parsimony columns take few distinct values
per state. So a batch keeps, per tree node slot, the columns of that slot (``pruned``, ``regraft``), one row
per distinct parsimony value (``shared``) and per move one int32 ``shared`` row number. The moves pruning
``(p, k)`` regraft in the order of one walk of the far side, shared by both other pruned slots, so each walk
is kept once (``walk_slot``, ``walk_own``: the prune–regraft distances) and the moves as blocks of a pruned
slot and a run of walk rows. About 10 bytes a rich move instead of 100. The learner's batch crosses to the GPU
in this form and :func:`expand_actions` makes the :class:`~phylorl.nets.inputs.ActionBatch` there, the same
bits as :func:`phylorl.records.moves.expand_moves` on the host (``tests/unit/records/test_collate.py``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from .inputs import ActionBatch
from .one_call import one_call
from .segment import Segments, segments_from_sizes


@dataclass
class CompactActions:
    """All moves of ``G`` states.

    ``slot_node``  int64   ``[3N]``     global id of ``neighbors[v, k]`` for slot ``3 v + k`` (``v`` global).
    ``pruned``     float32 ``[3N, Kp]`` the columns of a move pruning slot ``3 p + k``.
    ``regraft``    float32 ``[3N, Kr]`` the columns of a move regrafting onto slot ``3 x + j``.
    ``shared``     float32 ``[T, Ks]``  rows several moves share (the parsimony columns; ``Ks`` may be 0).
    ``walk_slot``  int32   ``[W]``      the regraft slot of each walk row.
    ``walk_own``   float32 ``[W, Ko]``  the own columns of a move regrafting at that walk row.
    ``blocks``     int32   ``[Bk, 3]``  the moves in order, as blocks: pruned slot, first walk row, moves.
    ``shared_row`` int32   ``[A]``      each move's ``shared`` row.
    ``columns``    int64   ``[K]``      meta column ``c`` is column ``columns[c]`` of
                                        ``cat(pruned, regraft, shared, own)`` (gathered per move).
    ``sizes``      int64   ``[G]``      moves per state (the ``A`` moves are the states' in order).
    ``uniform``    the moves per state when every state has as many, else ``None``.

    Each move's state (:class:`Segments` ``index``) is made where the moves are expanded, not sent.
    """

    slot_node: Tensor
    pruned: Tensor
    regraft: Tensor
    shared: Tensor
    walk_slot: Tensor
    walk_own: Tensor
    blocks: Tensor
    shared_row: Tensor
    columns: Tensor
    sizes: Tensor
    uniform: int | None

    def states(self) -> Segments:
        """The :class:`Segments` of the moves over the states, on the arrays' device (no host sync)."""
        return segments_from_sizes(self.sizes, self.uniform, self.count)

    @property
    def count(self) -> int:
        return int(self.shared_row.shape[0])


def expand_actions(compact: CompactActions) -> ActionBatch:
    """The :class:`ActionBatch` of ``compact`` on its device, without a host sync (the same values as
    :func:`phylorl.records.moves.expand_moves` on the host), its some twenty operations in one TorchScript
    call (:mod:`~phylorl.nets.one_call`)."""
    nodes, meta, index, _ = _expansion()([getattr(compact, name) for name in TENSORS], compact.count)
    return action_batch(nodes, meta, index, compact.sizes, compact.uniform)


def action_batch(
    nodes: Tensor, meta: Tensor, index: Tensor, sizes: Tensor, uniform: int | None
) -> ActionBatch:
    """The :class:`ActionBatch` of :func:`expand_tensors`' ``(nodes, meta, index)`` and the states' move
    counts."""
    return ActionBatch(
        nodes=nodes,
        meta=meta,
        states=Segments(index=index, sizes=sizes, count=int(sizes.shape[0]), size=uniform),
    )


def expand_tensors(tensors: list[Tensor], count: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(nodes, meta, state index)`` of the moves (see :func:`expand_actions`) from the :data:`TENSORS` of a
    :class:`CompactActions`, in that order."""
    slot_node, pruned_cols, regraft_cols, shared = tensors[0], tensors[1], tensors[2], tensors[3]
    walk_slot, walk_own, blocks, shared_row = tensors[4], tensors[5], tensors[6].long(), tensors[7]
    columns, sizes = tensors[8], tensors[9]
    lengths = blocks[:, 2]
    block = torch.repeat_interleave(
        torch.arange(blocks.shape[0], device=blocks.device), lengths, output_size=count
    )
    # a block's first walk row less its first move
    shift = blocks[:, 1] - (torch.cumsum(lengths, 0) - lengths)
    walk = shift.index_select(0, block) + torch.arange(count, device=blocks.device)
    pruned, regraft = blocks[:, 0].index_select(0, block), walk_slot.long().index_select(0, walk)
    nodes = torch.stack(
        (
            torch.div(pruned, 3, rounding_mode="floor"),
            slot_node.index_select(0, pruned),
            torch.div(regraft, 3, rounding_mode="floor"),
            slot_node.index_select(0, regraft),
        ),
        dim=1,
    )
    parts = torch.cat(
        (
            pruned_cols.index_select(0, pruned),
            regraft_cols.index_select(0, regraft),
            shared.index_select(0, shared_row.long()),
            walk_own.index_select(0, walk),
        ),
        1,
    )
    index = torch.repeat_interleave(
        torch.arange(sizes.shape[0], device=sizes.device), sizes, output_size=count
    )
    return nodes, parts.index_select(1, columns), index


def _expand_kept(tensors: list[Tensor], count: int) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
    """:func:`expand_tensors`, its tensor arguments returned too (kept to the end:
    :mod:`~phylorl.nets.one_call`)."""
    nodes, meta, index = expand_tensors(tensors, count)
    return nodes, meta, index, tensors


@functools.cache
def _expansion():
    """:func:`_expand_kept` as one call (:func:`~phylorl.nets.one_call.one_call`, compiled on first use)."""
    return one_call(_expand_kept)


TENSORS = tuple(f.name for f in dataclasses.fields(CompactActions) if f.name != "uniform")
"""The tensor fields of :class:`CompactActions`, in :func:`expand_tensors`' order."""
