from phylorl.wire.v1 import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActRequest(_message.Message):
    __slots__ = ("actor_id", "states", "greedy")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    GREEDY_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    states: _common_pb2.PackedObservations
    greedy: bool
    def __init__(self, actor_id: _Optional[str] = ..., states: _Optional[_Union[_common_pb2.PackedObservations, _Mapping]] = ..., greedy: _Optional[bool] = ...) -> None: ...

class ActResponse(_message.Message):
    __slots__ = ("actions", "q", "v", "weights_version")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    V_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_VERSION_FIELD_NUMBER: _ClassVar[int]
    actions: _common_pb2.NDArray
    q: _common_pb2.NDArray
    v: _common_pb2.NDArray
    weights_version: int
    def __init__(self, actions: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., q: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., v: _Optional[_Union[_common_pb2.NDArray, _Mapping]] = ..., weights_version: _Optional[int] = ...) -> None: ...
