from phylorl.wire.v1 import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InsertRequest(_message.Message):
    __slots__ = ("packed", "priorities", "timeout_ms", "producer", "first_sequence")
    PACKED_FIELD_NUMBER: _ClassVar[int]
    PRIORITIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    packed: _common_pb2.PackedTransitions
    priorities: _common_pb2.NDArray
    timeout_ms: int
    producer: str
    first_sequence: int
    def __init__(self, packed: _Optional[_Union[_common_pb2.PackedTransitions, _Mapping]] = ..., priorities: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., producer: _Optional[str] = ..., first_sequence: _Optional[int] = ...) -> None: ...

class InsertResponse(_message.Message):
    __slots__ = ("keys", "size", "duplicates")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    keys: _common_pb2.NDArray
    size: int
    duplicates: int
    def __init__(self, keys: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., size: _Optional[int] = ..., duplicates: _Optional[int] = ...) -> None: ...

class SampleRequest(_message.Message):
    __slots__ = ("batch_size", "timeout_ms", "beta")
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    batch_size: int
    timeout_ms: int
    beta: float
    def __init__(self, batch_size: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., beta: _Optional[float] = ...) -> None: ...

class SampleResponse(_message.Message):
    __slots__ = ("keys", "weights", "probabilities", "transitions", "size")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    keys: _common_pb2.NDArray
    weights: _common_pb2.NDArray
    probabilities: _common_pb2.NDArray
    transitions: _common_pb2.PackedTransitions
    size: int
    def __init__(self, keys: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., weights: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., probabilities: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., transitions: _Optional[_Union[_common_pb2.PackedTransitions, _Mapping]] = ..., size: _Optional[int] = ...) -> None: ...

class UpdatePrioritiesRequest(_message.Message):
    __slots__ = ("keys", "priorities")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PRIORITIES_FIELD_NUMBER: _ClassVar[int]
    keys: _common_pb2.NDArray
    priorities: _common_pb2.NDArray
    def __init__(self, keys: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., priorities: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ...) -> None: ...

class UpdatePrioritiesResponse(_message.Message):
    __slots__ = ("updated",)
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    updated: int
    def __init__(self, updated: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("size", "capacity", "inserted_total", "sampled_total", "evicted_total", "next_key", "total_priority", "max_priority", "alpha", "beta", "min_size_to_sample", "samples_per_insert", "rate_limiter_diff", "waiting_inserts", "waiting_samples")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    INSERTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EVICTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_KEY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MAX_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    MIN_SIZE_TO_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_INSERT_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMITER_DIFF_FIELD_NUMBER: _ClassVar[int]
    WAITING_INSERTS_FIELD_NUMBER: _ClassVar[int]
    WAITING_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    size: int
    capacity: int
    inserted_total: int
    sampled_total: int
    evicted_total: int
    next_key: int
    total_priority: float
    max_priority: float
    alpha: float
    beta: float
    min_size_to_sample: int
    samples_per_insert: float
    rate_limiter_diff: float
    waiting_inserts: int
    waiting_samples: int
    def __init__(self, size: _Optional[int] = ..., capacity: _Optional[int] = ..., inserted_total: _Optional[int] = ..., sampled_total: _Optional[int] = ..., evicted_total: _Optional[int] = ..., next_key: _Optional[int] = ..., total_priority: _Optional[float] = ..., max_priority: _Optional[float] = ..., alpha: _Optional[float] = ..., beta: _Optional[float] = ..., min_size_to_sample: _Optional[int] = ..., samples_per_insert: _Optional[float] = ..., rate_limiter_diff: _Optional[float] = ..., waiting_inserts: _Optional[int] = ..., waiting_samples: _Optional[int] = ...) -> None: ...
