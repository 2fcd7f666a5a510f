"""numpy <-> protobuf codecs for the ``phylorl.v1`` messages.

Arrays travel as ``NDArray`` (little-endian bytes in C order, shape, numpy dtype name). Decoded
arrays are read-only views of the message bytes; copy them before writing in place.
Transitions can also travel as compact records (:mod:`phylorl.wire.record`), many of them
concatenated in one ``PackedTransitions`` message. For large batches :func:`packed_records_field`
writes that message straight from the records (:mod:`phylorl.wire.protowire`), skipping the copies
the protobuf runtime would make; reading goes through the runtime (:func:`unpack_records`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from phylorl.types import Observation, Transition
from phylorl.wire import protowire
from phylorl.wire.record import OBS_FIELDS, encode_observation
from phylorl.wire.v1 import common_pb2

_WIRE_DTYPES = frozenset(
    ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64")
)
_NAMES = {np.dtype(name): name for name in _WIRE_DTYPES}
"""Each wire dtype's name by its native numpy dtype: ``dtype.name`` builds its string at each call (3 µs here, most
of an ``NDArray``'s packing; the endpoint packs three a request)."""
_LITTLE = {name: np.dtype(name).newbyteorder("<") for name in _WIRE_DTYPES}


def ndarray_to_proto(array: np.ndarray, out: common_pb2.NDArray | None = None) -> common_pb2.NDArray:
    """Pack ``array`` into an ``NDArray`` (filling ``out`` when given)."""
    array = np.asarray(array)
    name = _NAMES.get(array.dtype) or array.dtype.name  # (a non-native byte order: the slow way)
    if name not in _WIRE_DTYPES:
        raise ValueError(f"dtype {array.dtype} cannot go on the wire; use bool, (u)int8-64 or float16-64")
    message = common_pb2.NDArray() if out is None else out
    message.data = array.astype(_LITTLE[name], copy=False).tobytes()  # C order
    message.shape[:] = array.shape
    message.dtype = name
    return message


def ndarray_from_proto(message: common_pb2.NDArray) -> np.ndarray:
    """Read-only array view of an ``NDArray``; raises ``ValueError`` when its parts disagree."""
    dtype = _LITTLE.get(message.dtype)
    if dtype is None:
        raise ValueError(f"NDArray has unknown dtype {message.dtype!r}")
    shape = tuple(message.shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"NDArray has a negative extent in shape {shape}")
    expected = math.prod(shape) * dtype.itemsize  # (exact: no int64 wrap-around for a hostile shape)
    data = message.data
    if len(data) != expected:
        raise ValueError(f"NDArray of shape {shape} and dtype {message.dtype} needs {expected} bytes, has {len(data)}")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def observation_to_proto(obs: Observation, out: common_pb2.Observation | None = None) -> common_pb2.Observation:
    """Pack an :class:`Observation` (filling ``out`` when given)."""
    message = common_pb2.Observation() if out is None else out
    for name in OBS_FIELDS:
        ndarray_to_proto(getattr(obs, name), getattr(message, name))
    return message


def observation_from_proto(message: common_pb2.Observation) -> Observation:
    """Unpack an ``Observation`` message; arrays are read-only views."""
    return Observation(*(ndarray_from_proto(getattr(message, name)) for name in OBS_FIELDS))


def transition_to_proto(transition: Transition, out: common_pb2.Transition | None = None) -> common_pb2.Transition:
    """Pack a :class:`Transition` (filling ``out`` when given)."""
    message = common_pb2.Transition() if out is None else out
    observation_to_proto(transition.obs, message.obs)
    observation_to_proto(transition.next_obs, message.next_obs)
    message.action = int(transition.action)
    message.reward = float(transition.reward)
    message.terminal = bool(transition.terminal)
    message.truncated = bool(transition.truncated)
    message.discount = float(transition.discount)
    message.policy_version = int(transition.policy_version)
    return message


def transition_from_proto(message: common_pb2.Transition) -> Transition:
    """Unpack a ``Transition`` message; arrays are read-only views."""
    for name in ("obs", "next_obs"):
        if not message.HasField(name):
            raise ValueError(f"Transition message has no {name}")
    return Transition(
        obs=observation_from_proto(message.obs),
        action=message.action,
        reward=message.reward,
        next_obs=observation_from_proto(message.next_obs),
        terminal=message.terminal,
        truncated=message.truncated,
        discount=message.discount,
        policy_version=message.policy_version,
    )


class PackedRecords(Sequence):
    """Records concatenated in one buffer: record ``i`` is ``data[offsets[i]:offsets[i + 1]]``.

    The form a batch has in a ``PackedTransitions`` message, kept as it is so that a batch moves
    between the wire and Redis without a Python object per record. Indexing gives zero-copy
    ``memoryview`` slices; ``offsets`` is int64 ``[n + 1]``, rising from 0 to ``len(data)``.
    """

    __slots__ = ("data", "offsets")

    def __init__(self, data: bytes | memoryview, offsets: np.ndarray):
        data = memoryview(data)
        offsets = np.asarray(offsets)
        if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
            raise ValueError(f"PackedTransitions.offsets must be a non-empty 1-D integer array, got "
                             f"{offsets.dtype} {offsets.shape}")
        offsets = offsets.astype(np.int64)
        if offsets[0] != 0 or offsets[-1] != data.nbytes or np.any(offsets[1:] < offsets[:-1]):
            raise ValueError(f"PackedTransitions.offsets must rise from 0 to len(data) = {data.nbytes}")
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
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} of {n}")
        i %= n
        return self.data[int(self.offsets[i]):int(self.offsets[i + 1])]

    def __iter__(self) -> Iterator[memoryview]:
        return iter(self.views())

    def views(self) -> list[memoryview]:
        """Every record as a zero-copy slice of ``data``."""
        bounds = self.offsets.tolist()
        data = self.data
        return [data[b:e] for b, e in zip(bounds, bounds[1:])]


def pack_records(records: Sequence[bytes | memoryview], out=None) -> common_pb2.PackedTransitions:
    """Concatenate compact records into one ``PackedTransitions`` (filling ``out`` when given: a
    ``PackedTransitions`` or ``PackedObservations``)."""
    message = common_pb2.PackedTransitions() if out is None else out
    packed = PackedRecords.from_records(records)
    message.data = bytes(packed.data)
    ndarray_to_proto(packed.offsets.astype(np.uint64), message.offsets)
    return message


def pack_observations(observations: Sequence[Observation],
                      out: common_pb2.PackedObservations | None = None) -> common_pb2.PackedObservations:
    """Observations as observation records (:func:`~phylorl.wire.record.encode_observation`: the tree
    forms when exact) in one ``PackedObservations`` (filling ``out`` when given)."""
    message = common_pb2.PackedObservations() if out is None else out
    return pack_records([encode_observation(obs) for obs in observations], message)


def unpack_records(message: "common_pb2.PackedTransitions | common_pb2.PackedObservations") -> PackedRecords:
    """Split a ``PackedTransitions`` or ``PackedObservations`` into its records (zero-copy views of
    ``message.data``)."""
    return PackedRecords(message.data, ndarray_from_proto(message.offsets))


def packed_records_field(number: int, records: Sequence[bytes | memoryview]) -> list[bytes | memoryview]:
    """Wire pieces of a ``PackedTransitions`` field ``number`` holding ``records``.

    ``b"".join(pieces)`` appended to a serialised message sets its field ``number`` to what
    :func:`pack_records` would build, with the records copied once (by the join) instead of three times.
    """
    if isinstance(records, PackedRecords):
        offsets, pieces = records.offsets, [records.data]
    else:
        offsets = np.zeros(len(records) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in records], out=offsets[1:])
        pieces = list(records)
    offsets_message = ndarray_to_proto(offsets.astype(np.uint64)).SerializeToString()
    data_header = protowire.len_header(1, int(offsets[-1]))
    offsets_header = protowire.len_header(2, len(offsets_message))
    body = len(data_header) + int(offsets[-1]) + len(offsets_header) + len(offsets_message)
    return [protowire.len_header(number, body), data_header, *pieces, offsets_header, offsets_message]
