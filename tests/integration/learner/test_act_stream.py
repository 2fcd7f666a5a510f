"""``ActStream`` over real loopback: one answer per request, in order, each as a stream of its own would give
it; a refused request ends the stream with its status; the calls-in-flight bound refuses rather than queues;
the actor's client."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
import torch
from test_inference import _call, _observations
from test_inference import _request as _states_request

from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.actor.act_stream import ActStream
from services.learner.inference import BatchingInference
from services.learner.server import InferenceServer

SMALL = NetworkConfig(hidden=32, action_hidden=32, head_hidden=32)


def _request(count: int, seed: int, greedy: bool = True) -> inference_pb2.ActRequest:
    return _states_request(_observations(count, 9, seed), greedy)


def _serve(max_calls: int = 64, publish: bool = True):
    inference = BatchingInference(SMALL, torch.device("cpu"), max_batch=16, max_delay_s=0.001, max_queue=64)
    if publish:
        learner = Learner(SMALL, device="cpu", seed=0)
        inference.publish(learner.policy_weights(), learner.alpha, 3)
    server = InferenceServer(inference, "127.0.0.1", 0, max_calls=max_calls)
    server.start()
    server.set_serving()
    return inference, server


@pytest.fixture
def stub():
    inference, server = _serve()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    yield inference_pb2_grpc.InferenceServiceStub(channel)
    channel.close()
    server.stop(1.0)
    inference.close()


def _answer(reply) -> tuple:
    return tuple(codec.ndarray_from_proto(a).tolist() for a in (reply.actions, reply.q, reply.v)) + (
        reply.weights_version,
    )


def test_a_stream_answers_each_request_in_order_as_a_stream_of_its_own_does(stub):
    requests = [_request(count, seed) for count, seed in ((1, 1), (3, 2), (2, 3), (1, 4))]
    streamed = list(stub.ActStream(iter(requests), timeout=60))
    assert [len(r.actions.data) // 8 for r in streamed] == [1, 3, 2, 1]  # one answer per request, in order
    assert [_answer(r) for r in streamed] == [_answer(_call(stub, r)) for r in requests]  # greedy: equal


def test_a_refused_request_ends_the_stream_with_its_status_after_the_answers_before_it(stub):
    empty = inference_pb2.ActRequest(actor_id="t")  # no states field: refused with INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as alone:
        _call(stub, empty, timeout=10)
    answers = stub.ActStream(iter([_request(2, 5), empty, _request(1, 6)]), timeout=60)
    assert len(next(answers).actions.data) == 16
    with pytest.raises(grpc.RpcError) as streamed:
        next(answers)
    assert (streamed.value.code(), streamed.value.details()) == (alone.value.code(), alone.value.details())
    assert streamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _answer(_call(stub, _request(1, 6)))[3] == 3  # the endpoint goes on


def test_calls_beyond_max_calls_are_refused_at_once_while_streams_hold_them():
    """Two open streams fill a bound of two: a third call is RESOURCE_EXHAUSTED (which actors retry) without
    waiting; once a stream ends, calls are served again."""
    inference, server = _serve(max_calls=2)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = inference_pb2_grpc.InferenceServiceStub(channel)
    streams = [ActStream(stub, timeout_s=30.0) for _ in range(2)]
    try:
        for stream in streams:
            stream.send(_request(1, 7))
            assert _answer(stream.receive())[3] == 3  # open, and answered
        with pytest.raises(grpc.RpcError) as refused:
            _call(stub, _request(1, 8), timeout=20)
        # refused (queued: DEADLINE_EXCEEDED)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        streams[0].cancel()
        deadline = time.monotonic() + 10
        while True:  # the server counts the cancelled stream out shortly after
            try:
                assert _answer(_call(stub, _request(1, 8), timeout=20))[3] == 3
                break
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        for stream in streams:
            stream.close()
        channel.close()
        server.stop(1.0)
        inference.close()


def test_the_actors_stream_client_reopens_after_a_failure_and_times_out_a_missing_answer():
    """:class:`ActStream`: a refused request raises its status and closes the stream, the next send opens a
    new one; an answer that does not come within the timeout is DEADLINE_EXCEEDED (nothing published: the
    request waits)."""
    inference, server = _serve(publish=False)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = inference_pb2_grpc.InferenceServiceStub(channel)
    stream = ActStream(stub, timeout_s=0.5)
    try:
        stream.send(_request(1, 9))
        with pytest.raises(grpc.RpcError) as waited:
            stream.receive()
        assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        learner = Learner(SMALL, device="cpu", seed=0)
        inference.publish(learner.policy_weights(), learner.alpha, 5)
        stream = ActStream(stub, timeout_s=30.0)
        stream.send(inference_pb2.ActRequest(actor_id="t"))
        with pytest.raises(grpc.RpcError) as refused:
            stream.receive()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        for seed in (10, 11):  # a new stream, then its next message
            stream.send(_request(2, seed))
            assert _answer(stream.receive()) == _answer(_call(stub, _request(2, seed), timeout=30))
    finally:
        stream.close()
        channel.close()
        server.stop(1.0)
        inference.close()


def test_a_stopping_server_answers_the_request_out_then_ends_its_stream_without_waiting_out_the_grace():
    """A stream never ends by itself. A stopping server answers the requests it is answering within its grace
    (here one waits for the batcher), then cancels the streams left, idle or not: its stop takes the time the
    answers take, not the 30 s grace, and the stream's next request fails UNAVAILABLE (which actors retry)."""
    inference, server = _serve(publish=False)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stream = ActStream(inference_pb2_grpc.InferenceServiceStub(channel), timeout_s=30.0)
    idle = ActStream(inference_pb2_grpc.InferenceServiceStub(channel), timeout_s=30.0)
    try:
        learner = Learner(SMALL, device="cpu", seed=0)
        idle.send(_request(1, 11))
        inference.publish(learner.policy_weights(), learner.alpha, 3)
        assert _answer(idle.receive())[3] == 3  # open, and idle from now on
        with inference._lock:  # the batcher cannot take the snapshot to answer with: the request out waits
            stream.send(_request(1, 12))
            time.sleep(0.3)
            stopper = threading.Thread(target=server.stop, args=(30.0,))
            stopper.start()
            time.sleep(0.5)  # stopping, and waiting for the request out
            assert stopper.is_alive()
        assert _answer(stream.receive())[3] == 3  # answered within the grace
        stopper.join(20)
        assert not stopper.is_alive()  # then stopped, inside the 30 s grace
        for ended in (stream, idle):
            ended.send(_request(1, 13))
            with pytest.raises(grpc.RpcError) as failed:
                ended.receive()
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        stream.close()
        idle.close()
        channel.close()
        inference.close()
