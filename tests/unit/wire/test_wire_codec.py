"""numpy <-> protobuf codecs: exact round trips and clear errors."""

import numpy as np
import pytest

from phylorl.records.arrays import DTYPE_NAMES
from phylorl.wire import codec
from phylorl.wire.v1 import common_pb2

ALL_DTYPES = list(DTYPE_NAMES)


def assert_same_array(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()  # bit-exact, NaN payloads and -0.0 included


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_ndarray_round_trip_every_dtype(dtype):
    rng = np.random.default_rng(0)
    array = (rng.normal(size=(3, 4, 2)) * 100).astype(dtype)
    message = common_pb2.NDArray.FromString(codec.ndarray_to_proto(array).SerializeToString())
    assert message.dtype == dtype and list(message.shape) == [3, 4, 2]
    assert len(message.data) == array.nbytes
    assert_same_array(codec.ndarray_from_proto(message), array)


def test_ndarray_is_little_endian_c_order_on_the_wire():
    array = np.array([[1, 2], [3, 4]], dtype=">i4").T  # big-endian input, not C-contiguous
    message = codec.ndarray_to_proto(array)
    assert message.dtype == "int32"
    assert message.data == bytes([1, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0])
    np.testing.assert_array_equal(codec.ndarray_from_proto(message), [[1, 3], [2, 4]])


def test_ndarray_scalar_and_empty():
    for array in (np.float32(2.5) * np.ones(()), np.zeros((0, 4), dtype=np.int64)):
        assert_same_array(codec.ndarray_from_proto(codec.ndarray_to_proto(array)), array)


def test_ndarray_special_floats_bit_exact():
    # -0, NaN, ±inf, denormal
    bits = np.array([0x80000000, 0x7FC00001, 0x7F800000, 0xFF800000, 1], dtype=np.uint32)
    array = bits.view(np.float32)
    assert_same_array(codec.ndarray_from_proto(codec.ndarray_to_proto(array)), array)


def test_ndarray_rejects_object_dtype_and_inconsistent_messages():
    with pytest.raises(ValueError, match="dtype object"):
        codec.ndarray_to_proto(np.array(["a", None], dtype=object))
    with pytest.raises(ValueError, match="needs 24 bytes, has 8"):
        codec.ndarray_from_proto(common_pb2.NDArray(data=b"\0" * 8, shape=[3], dtype="float64"))
    with pytest.raises(ValueError, match="unknown dtype 'complex64'"):
        codec.ndarray_from_proto(common_pb2.NDArray(data=b"", shape=[0], dtype="complex64"))
    # 2**62 * 4 * 8 bytes wraps to 0 in int64 arithmetic: the extent is counted exactly, and named
    with pytest.raises(ValueError, match=f"needs {2**67} bytes, has 0"):
        codec.ndarray_from_proto(common_pb2.NDArray(data=b"", shape=[2**62, 4], dtype="int64"))
    with pytest.raises(ValueError, match="dtype >c8 cannot go on the wire"):
        codec.ndarray_to_proto(np.zeros(2, dtype=">c8"))


def test_pack_and_unpack_records():
    records = [b"PRLT\x01abc", b"", b"PRLT\x01" + bytes(range(200))]
    packed = common_pb2.PackedTransitions.FromString(codec.pack_records(records).SerializeToString())
    np.testing.assert_array_equal(codec.ndarray_from_proto(packed.offsets), [0, 8, 8, 213])
    assert [bytes(r) for r in codec.unpack_records(packed)] == records


def test_unpack_records_rejects_bad_offsets():
    packed = codec.pack_records([b"abcd", b"ef"])
    packed.offsets.CopyFrom(codec.ndarray_to_proto(np.array([0, 5, 4], dtype=np.uint64)))
    with pytest.raises(ValueError, match="rise from 0 to len"):
        codec.unpack_records(packed)
