"""Hostile input against the real replay service (gRPC on loopback, a real redis-server), property-based:
garbage bytes, records cut short, transitions with one state broken (:mod:`hostile`: shapes, dtypes, NaN or
infinite values, node ids out of range, a tree that is not binary, no move), an action that is not a move, a
discount outside [0, 1], bad priorities.
Each Insert is answered INVALID_ARGUMENT, nothing of it is stored, and the service keeps serving. A message
beyond the size limit gets gRPC's own RESOURCE_EXHAUSTED and the service goes on too."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from helpers import serve_replay
from hostile import BAD_FLOATS, broken, parts_of, state_bytes, transition_record, valid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phylorl.records.batch import BAD_ACTION, NOT_FINITE, REASONS
from phylorl.records.codec import encode_transition
from phylorl.types import Transition
from phylorl.wire import codec
from phylorl.wire.v1 import replay_pb2
from services.replay.client import ReplayClient

MAX_MESSAGE_BYTES = 1 << 20


@pytest.fixture(scope="module")
def served(redis_server):
    client = redis_server.client()
    client.flushdb()
    table, server = serve_replay(client, "test:hostile", max_message_bytes=MAX_MESSAGE_BYTES)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    raw_insert = channel.unary_unary(
        "/phylorl.v1.ReplayService/Insert", request_serializer=None, response_deserializer=None
    )
    replay = ReplayClient(f"127.0.0.1:{server.port}")
    yield table, raw_insert, replay
    replay.close()
    channel.close()
    server.stop(grace_s=1.0)


def good_transition(seed: int = 0) -> Transition:
    return Transition(
        obs=valid(seed, 6),
        action=1,
        reward=0.25,
        next_obs=valid(seed + 1, 6),
        terminal=False,
        truncated=False,
        discount=0.9,
    )


def refused(served, raw: bytes) -> str:
    """Send ``raw`` as an Insert: it must be INVALID_ARGUMENT, store nothing, and a good insert must
    follow."""
    table, raw_insert, replay = served
    size = table.stats().size
    with pytest.raises(grpc.RpcError) as raised:
        raw_insert(raw, timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value.details()
    assert table.stats().size == size
    replay.insert_records([encode_transition(good_transition())], np.ones(1))  # still serving
    assert table.stats().size == size + 1
    return raised.value.details()


def insert_bytes(records, priorities=None) -> bytes:
    request = replay_pb2.InsertRequest(timeout_ms=5000)
    codec.pack_records(records, request.packed)
    if priorities is not None:
        codec.ndarray_to_proto(np.asarray(priorities, np.float64), request.priorities)
    return request.SerializeToString()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=300))
def test_garbage_bytes_are_invalid_argument(served, garbage):
    refused(served, garbage)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 50), cut=st.floats(0.0, 0.999), position=st.integers(0, 2))
def test_a_record_cut_short_is_invalid_argument(served, seed, cut, position):
    records = [encode_transition(good_transition(seed + i)) for i in range(3)]
    records[position] = records[position][: int(cut * len(records[position]))]
    assert f"record {position}" in refused(served, insert_bytes(records))  # "[packed ]record <i>: why"


def test_hand_written_records_are_stored_when_nothing_is_broken(served):
    """The records the tests below break are accepted whole (so a refusal is the broken part's)."""
    table, raw_insert, _ = served
    size = table.stats().size
    raw_insert(
        insert_bytes(
            [
                transition_record(state_bytes(parts_of(valid(seed))), state_bytes(parts_of(valid(9))))
                for seed in range(3)
            ]
        ),
        timeout=30,
    )
    assert table.stats().size == size + 3


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=broken(), which=st.sampled_from(["obs", "next_obs"]))
def test_a_broken_state_is_invalid_argument(served, bad, which):
    good = state_bytes(parts_of(valid(3)))
    record = transition_record(bad, good) if which == "obs" else transition_record(good, bad)
    details = refused(served, insert_bytes([encode_transition(good_transition(4)), record]))
    assert details.startswith("record 1:")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    what=st.sampled_from(["reward", "discount", "action"]),
    bad_float=BAD_FLOATS,
    out=st.sampled_from([-0.5, 1.5, 7.0]),
    action=st.sampled_from([-1, 10_000]),
)
def test_bad_scalars_are_invalid_argument(served, what, bad_float, out, action):
    states = state_bytes(parts_of(valid(5))), state_bytes(parts_of(valid(6)))
    scalars = {
        "reward": dict(reward=bad_float),
        "discount": dict(discount=out),
        "action": dict(action=action),
    }[what]
    details = refused(served, insert_bytes([transition_record(*states, **scalars)]))
    assert details == f"record 0: {REASONS[BAD_ACTION if what == 'action' else NOT_FINITE]}"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(["count", "nan", "inf", "negative"]))
def test_bad_priorities_are_invalid_argument(served, how):
    records = [encode_transition(good_transition(i)) for i in range(2)]
    priorities = {
        "count": np.ones(3),
        "nan": np.array([1.0, np.nan]),
        "inf": np.array([np.inf, 1.0]),
        "negative": np.array([1.0, -2.0]),
    }[how]
    refused(served, insert_bytes(records, priorities))


def test_an_oversized_message_is_refused_and_the_service_goes_on(served):
    table, raw_insert, replay = served
    size = table.stats().size
    with pytest.raises(grpc.RpcError) as raised:
        raw_insert(insert_bytes([b"PRLT\x03" + bytes(MAX_MESSAGE_BYTES)]), timeout=30)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # gRPC's status for a message too large
    assert table.stats().size == size
    replay.insert_records([encode_transition(good_transition())], np.ones(1))
    assert table.stats().size == size + 1
