"""The record layout (all little-endian) and a batch of records as one buffer.

A transition record holds one :class:`~phylorl.types.Transition`::

    header        "<4sBBqddq" magic b"PRLT", format version, flags (bit 0 terminal, bit 1 truncated, bit 2
                  labelled, bit 3 taken row), action (int64), reward (float64), discount (float64),
                  policy_version (int64: the weights version that chose the action, -1 unknown)
    obs, next_obs each one state: "<B" form, "<IiB" leaves, move radius (-1: none), flags (bit 0 dedupe, bit 1
                  always set: the node features are is_leaf), then the arrays neighbors int32 [N, 3], edges
                  int32 [N-1, 2] and branch lengths float32 [N-1]; the rich form (2) then holds each move's
                  parsimony change (float32 [A], ranked: :mod:`~phylorl.records.arrays`), the tree's parsimony
                  length (float64 [1]) and each edge's split support (float32 [N-1]); the basic form (1) ends
                  with the lengths. The moves are ``enumerate_moves`` over the neighbour table's slot order,
                  and every feature follows from these arrays (:mod:`~phylorl.records.features`).
    taken row     with flag bit 3: the taken move's node ids (int64 [4]) and features (float32 [K]), which the
                  learner's batch pass reads instead of finding that move among the state's; the replay's
                  insert check verifies them
    next_labels   with flag bit 2: float32 [A'], the demonstration label (reward) of every move of next_obs

An observation record (an inference request's state) is ``"<4sB"`` magic b"PRLO" and the format version, then
one state as above. Each array is stored as :mod:`phylorl.records.arrays` describes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import numpy as np

MAGIC, OBSERVATION_MAGIC = b"PRLT", b"PRLO"
VERSION = 5
HEADER = struct.Struct("<4sBBqddq")
OBSERVATION_HEADER = struct.Struct("<4sB")
FORM = struct.Struct("<B")
TREE = struct.Struct("<IiB")
TREE_FORM, RICH_FORM = 1, 2
DEDUPE, LEAF_FEATURES = 1, 2
TERMINAL, TRUNCATED, LABELLED, TAKEN = 1, 2, 4, 8


class PackedRecords(Sequence):
    """Records concatenated in one buffer: record ``i`` is ``data[offsets[i]:offsets[i + 1]]``. The form a
    batch has on the wire and in Redis, kept as it is so that a batch moves between them without a Python
    object per record. Indexing gives zero-copy ``memoryview`` slices; ``offsets`` is int64 ``[n + 1]``,
    rising from 0 to ``len(data)``."""

    __slots__ = ("data", "offsets")

    def __init__(self, data: bytes | memoryview, offsets: np.ndarray):
        data = memoryview(data)
        offsets = np.asarray(offsets)
        if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
            raise ValueError(
                f"record offsets must be a non-empty 1-D integer array, got {offsets.dtype} {offsets.shape}"
            )
        offsets = offsets.astype(np.int64)
        if offsets[0] != 0 or offsets[-1] != data.nbytes or np.any(offsets[1:] < offsets[:-1]):
            raise ValueError(f"record offsets must rise from 0 to len(data) = {data.nbytes}")
        self.data, self.offsets = data, offsets

    @classmethod
    def from_records(cls, records: Sequence[bytes | memoryview]) -> PackedRecords:
        """Concatenate ``records`` (a :class:`PackedRecords` is returned as it is)."""
        if isinstance(records, PackedRecords):
            return records
        lengths = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
        offsets = np.zeros(len(records) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(b"".join(records), offsets)

    @property
    def buffer(self) -> np.ndarray:
        """``data`` as a uint8 array (no copy), as the compiled passes read it."""
        return np.frombuffer(self.data, dtype=np.uint8)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} of {n}")
        i %= n
        return self.data[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def __iter__(self) -> Iterator[memoryview]:
        bounds = self.offsets.tolist()
        data = self.data
        return iter([data[b:e] for b, e in zip(bounds, bounds[1:])])
