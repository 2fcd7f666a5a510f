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

class Observation(_message.Message):
    __slots__ = ("node_features", "edge_index", "edge_attr", "actions", "action_meta")
    NODE_FEATURES_FIELD_NUMBER: _ClassVar[int]
    EDGE_INDEX_FIELD_NUMBER: _ClassVar[int]
    EDGE_ATTR_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ACTION_META_FIELD_NUMBER: _ClassVar[int]
    node_features: NDArray
    edge_index: NDArray
    edge_attr: NDArray
    actions: NDArray
    action_meta: NDArray
    def __init__(self, node_features: _Optional[_Union[NDArray, _Mapping]] = ..., edge_index: _Optional[_Union[NDArray, _Mapping]] = ..., edge_attr: _Optional[_Union[NDArray, _Mapping]] = ..., actions: _Optional[_Union[NDArray, _Mapping]] = ..., action_meta: _Optional[_Union[NDArray, _Mapping]] = ...) -> None: ...

class Transition(_message.Message):
    __slots__ = ("obs", "action", "reward", "next_obs", "terminal", "truncated", "discount", "policy_version")
    OBS_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    NEXT_OBS_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    DISCOUNT_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    obs: Observation
    action: int
    reward: float
    next_obs: Observation
    terminal: bool
    truncated: bool
    discount: float
    policy_version: int
    def __init__(self, obs: _Optional[_Union[Observation, _Mapping]] = ..., action: _Optional[int] = ..., reward: _Optional[float] = ..., next_obs: _Optional[_Union[Observation, _Mapping]] = ..., terminal: _Optional[bool] = ..., truncated: _Optional[bool] = ..., discount: _Optional[float] = ..., policy_version: _Optional[int] = ...) -> None: ...

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
