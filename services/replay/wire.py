"""Serialisers of the two bulky ReplayService messages (InsertRequest, SampleResponse).

Both are ordinary ``phylorl.v1`` protobuf bytes on the wire, so any client can use the generated
stubs. These functions only avoid the protobuf runtime's copies of the megabyte ``transitions``
payload: the small fields go through the runtime, the records are written with one join and read
as views of the received buffer (see :mod:`phylorl.wire.protowire`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phylorl.wire import codec, protowire, record
from phylorl.wire.v1 import replay_pb2

_INSERT_PACKED = replay_pb2.InsertRequest.DESCRIPTOR.fields_by_name["packed"].number
_INSERT_TRANSITIONS = replay_pb2.InsertRequest.DESCRIPTOR.fields_by_name["transitions"].number
_SAMPLE_TRANSITIONS = replay_pb2.SampleResponse.DESCRIPTOR.fields_by_name["transitions"].number


@dataclass(frozen=True)
class InsertPayload:
    """An InsertRequest as the service uses it."""

    records: list[bytes | memoryview]
    priorities: np.ndarray | None   # float64 [n] or None (absent)
    timeout_ms: int


def encode_insert_request(records: Sequence[bytes | memoryview], priorities: np.ndarray | None,
                          timeout_ms: int) -> bytes:
    """Serialised ``InsertRequest`` carrying ``records`` as its ``packed`` payload."""
    small = replay_pb2.InsertRequest(timeout_ms=timeout_ms)
    if priorities is not None:
        codec.ndarray_to_proto(np.asarray(priorities, dtype=np.float64), small.priorities)
    return b"".join([small.SerializeToString(), *codec.packed_records_field(_INSERT_PACKED, records)])


def decode_insert_request(raw: bytes) -> InsertPayload:
    """Read an ``InsertRequest``; packed records stay views of ``raw``, plain Transitions are encoded."""
    packed, plain, small = None, False, []
    for field in protowire.iter_fields(raw):
        if field.number == _INSERT_PACKED:
            packed = field.value
        elif field.number == _INSERT_TRANSITIONS:
            plain = True
        else:
            small.append(raw[field.start:field.end])
    if plain:  # the convenience path: let the runtime parse it all
        request = replay_pb2.InsertRequest.FromString(raw)
        records = [record.encode_transition(codec.transition_from_proto(t))
                   for t in request.transitions.transitions]
    elif packed is not None:
        records = codec.records_from_wire(packed)
        for i, r in enumerate(records):
            if not record.is_record(r):
                raise ValueError(f"packed record {i} is not a transition record of format version {record.VERSION}")
        request = replay_pb2.InsertRequest.FromString(b"".join(small))
    else:
        raise ValueError("InsertRequest carries no transitions (set `packed` or `transitions`)")
    priorities = codec.ndarray_from_proto(request.priorities) if request.HasField("priorities") else None
    return InsertPayload(records=records, priorities=priorities, timeout_ms=request.timeout_ms)


def encode_sample_response(small: replay_pb2.SampleResponse, records: Sequence[bytes | memoryview]) -> bytes:
    """Serialised ``SampleResponse``: ``small`` (without transitions) plus ``records`` packed."""
    return b"".join([small.SerializeToString(), *codec.packed_records_field(_SAMPLE_TRANSITIONS, records)])


def decode_sample_response(raw: bytes) -> tuple[replay_pb2.SampleResponse, list[memoryview]]:
    """``(SampleResponse without transitions, records as views of raw)``."""
    small, records = [], []
    for field in protowire.iter_fields(raw):
        if field.number == _SAMPLE_TRANSITIONS:
            records = codec.records_from_wire(field.value)
        else:
            small.append(raw[field.start:field.end])
    return replay_pb2.SampleResponse.FromString(b"".join(small)), records
