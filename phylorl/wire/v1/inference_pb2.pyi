from phylorl.wire.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActRequest(_message.Message):
    __slots__ = ("actor_id", "run_id", "env_ids", "observations", "greedy", "return_all_q")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ENV_IDS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    GREEDY_FIELD_NUMBER: _ClassVar[int]
    RETURN_ALL_Q_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    run_id: str
    env_ids: _common_pb2.NDArray
    observations: _containers.RepeatedCompositeFieldContainer[_common_pb2.Observation]
    greedy: bool
    return_all_q: bool
    def __init__(self, actor_id: _Optional[str] = ..., run_id: _Optional[str] = ..., env_ids: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., observations: _Optional[_Iterable[_Union[_common_pb2.Observation, _Mapping]]] = ..., greedy: _Optional[bool] = ..., return_all_q: _Optional[bool] = ...) -> None: ...

class ActResponse(_message.Message):
    __slots__ = ("actions", "q", "v", "weights_version", "all_q", "all_q_offsets")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    V_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALL_Q_FIELD_NUMBER: _ClassVar[int]
    ALL_Q_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    actions: _common_pb2.NDArray
    q: _common_pb2.NDArray
    v: _common_pb2.NDArray
    weights_version: int
    all_q: _common_pb2.NDArray
    all_q_offsets: _common_pb2.NDArray
    def __init__(self, actions: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., q: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., v: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., weights_version: _Optional[int] = ..., all_q: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., all_q_offsets: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ...) -> None: ...

class GetWeightsRequest(_message.Message):
    __slots__ = ("known_version",)
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    known_version: int
    def __init__(self, known_version: _Optional[int] = ...) -> None: ...

class GetWeightsResponse(_message.Message):
    __slots__ = ("version", "weights", "format")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    version: int
    weights: bytes
    format: str
    def __init__(self, version: _Optional[int] = ..., weights: _Optional[bytes] = ..., format: _Optional[str] = ...) -> None: ...
