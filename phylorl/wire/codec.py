"""numpy <-> protobuf codecs for the ``phylorl.v1`` messages.

Arrays travel as ``NDArray`` (little-endian bytes in C order, shape, numpy dtype name); decoded arrays are
read-only views of the message bytes (copy them before writing in place). States and transitions travel as
records (:mod:`phylorl.records`), many of them concatenated in one ``PackedTransitions`` or
``PackedObservations``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from phylorl.records.arrays import DTYPE_NAMES
from phylorl.records.format import PackedRecords
from phylorl.wire.v1 import common_pb2

_LITTLE = {name: np.dtype(name).newbyteorder("<") for name in DTYPE_NAMES}  # the dtypes the wire carries


def ndarray_to_proto(array: np.ndarray, out: common_pb2.NDArray | None = None) -> common_pb2.NDArray:
    """Pack ``array`` into an ``NDArray`` (filling ``out`` when given)."""
    array = np.asarray(array)
    name = array.dtype.name
    if name not in _LITTLE:
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
        raise ValueError(
            f"NDArray of shape {shape} and dtype {message.dtype} needs {expected} bytes, has {len(data)}"
        )
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def pack_records(records: Sequence[bytes | memoryview], out=None):
    """Records concatenated in one ``PackedTransitions`` (filling ``out`` when given: a ``PackedTransitions``
    or ``PackedObservations``)."""
    message = common_pb2.PackedTransitions() if out is None else out
    packed = PackedRecords.from_records(records)
    message.data = bytes(packed.data)
    ndarray_to_proto(packed.offsets.astype(np.uint64), message.offsets)
    return message


def unpack_records(message) -> PackedRecords:
    """The records of a ``PackedTransitions`` or ``PackedObservations`` (zero-copy views of
    ``message.data``)."""
    return PackedRecords(message.data, ndarray_from_proto(message.offsets))
