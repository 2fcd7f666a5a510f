from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NDArray(_message.Message):
    __slots__ = ("data", "shape", "dtype")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    def __init__(self, data: _Optional[bytes] = ..., shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[str] = ...) -> None: ...

class PackedTransitions(_message.Message):
    __slots__ = ("data", "offsets")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offsets: NDArray
    def __init__(self, data: _Optional[bytes] = ..., offsets: _Optional[_Union[NDArray, _Mapping]] = ...) -> None: ...

class PackedObservations(_message.Message):
    __slots__ = ("data", "offsets")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offsets: NDArray
    def __init__(self, data: _Optional[bytes] = ..., offsets: _Optional[_Union[NDArray, _Mapping]] = ...) -> None: ...
