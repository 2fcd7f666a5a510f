"""The learner's inference endpoint over real gRPC on loopback: batching, versions, overload."""

from __future__ import annotations

import contextlib
import threading
import time

import grpc
import numpy as np
import pytest
import torch

from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_observation
from phylorl.records.codec import encode_observation
from phylorl.records.collate import state_inputs
from phylorl.records.format import PackedRecords
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.learner import metrics
from services.learner.inference import BatchingInference, Overloaded
from services.learner.server import InferenceServer

SMALL = NetworkConfig(hidden=32, action_hidden=32, head_hidden=32)


def _observations(count: int, n_taxa: int, seed: int, rich: bool = True):
    rng = np.random.default_rng(seed)
    return [random_observation(n_taxa, rng, rich=rich) for _ in range(count)]


def _records(observations) -> PackedRecords:
    return PackedRecords.from_records([encode_observation(o) for o in observations])


def _request(observations, greedy: bool = False) -> inference_pb2.ActRequest:
    request = inference_pb2.ActRequest(actor_id="t", greedy=greedy)
    codec.pack_records([encode_observation(o) for o in observations], request.states)
    return request


def _call(stub, request, timeout: float = 60):
    """One request as a stream of its own."""
    return next(stub.ActStream(iter([request]), timeout=timeout))


@pytest.fixture
def endpoint():
    learner = Learner(SMALL, device="cpu", seed=0)
    inference = BatchingInference(SMALL, torch.device("cpu"), max_batch=64, max_delay_s=0.05, max_queue=64)
    inference.publish(learner.policy_weights(), learner.alpha, 7)
    server = InferenceServer(inference, "127.0.0.1", 0)
    server.start()
    server.set_serving()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    yield inference_pb2_grpc.InferenceServiceStub(channel), inference, learner
    channel.close()
    server.stop(1.0)
    inference.close()


def _act(stub, observations, greedy=False):
    return _call(stub, _request(observations, greedy))


def test_concurrent_requests_are_merged_into_fewer_network_calls(endpoint):
    stub, _, _ = endpoint
    observations = _observations(16, 9, seed=1)
    calls_before = metrics.INFERENCE_BATCH._sum.get(), _count(metrics.INFERENCE_BATCH)
    stages = ("inputs", "batch", "network", "reply")
    stages_before = {s: _count(metrics.INFERENCE_STAGE.labels(s)) for s in stages}
    barrier = threading.Barrier(16)
    replies = [None] * 16

    def worker(i):
        barrier.wait()
        replies[i] = _act(stub, [observations[i]])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    network_calls = _count(metrics.INFERENCE_BATCH) - calls_before[1]
    observations_run = metrics.INFERENCE_BATCH._sum.get() - calls_before[0]
    assert observations_run == 16
    assert network_calls < 16  # several requests shared one network call
    # every request's inputs stage, every network call's batch, network and reply stages were timed
    # (the reply stage is recorded after the callers are woken: give the batching thread a moment)
    want = {"inputs": 16, "batch": network_calls, "network": network_calls, "reply": network_calls}
    deadline = time.monotonic() + 5.0
    while (
        timed := {s: _count(metrics.INFERENCE_STAGE.labels(s)) - stages_before[s] for s in stages}
    ) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    assert timed == want
    for reply, obs in zip(replies, observations):
        assert reply.weights_version == 7
        action = codec.ndarray_from_proto(reply.actions)
        assert action.shape == (1,) and 0 <= action[0] < obs.n_actions


def _count(histogram) -> float:
    return sum(bucket.get() for bucket in histogram._buckets)


def test_greedy_answers_are_the_argmax_and_values_are_consistent(endpoint):
    stub, inference, _ = endpoint
    observations = _observations(3, 8, seed=2)
    reply = _act(stub, observations, greedy=True)
    actions = codec.ndarray_from_proto(reply.actions)
    q = codec.ndarray_from_proto(reply.q)
    v = codec.ndarray_from_proto(reply.v)
    from phylorl.nets.twin import TwinQ

    nets = inference.snapshot.nets
    assert isinstance(nets, TwinQ)  # the endpoint runs both networks in one pass
    graphs, acts = state_inputs(observations)
    with torch.no_grad():
        all_q = nets(graphs, acts).numpy()
        separate = torch.minimum(nets.nets[0](graphs, acts), nets.nets[1](graphs, acts)).numpy()
    np.testing.assert_allclose(all_q, separate, rtol=1e-5, atol=1e-5)
    start = 0
    for i, obs in enumerate(observations):
        mine = all_q[start : start + obs.n_actions]
        assert actions[i] == int(np.argmax(mine))
        assert q[i] == pytest.approx(float(mine.max()), rel=1e-5)
        alpha = inference.snapshot.alpha
        assert v[i] == pytest.approx(alpha * float(np.log(np.exp(mine / alpha).sum())), rel=1e-4)
        start += obs.n_actions


def test_new_weights_change_the_version(endpoint):
    stub, inference, learner = endpoint
    assert _act(stub, _observations(1, 7, seed=3)).weights_version == 7
    inference.publish(learner.policy_weights(), learner.alpha, 8)
    assert _act(stub, _observations(1, 7, seed=3)).weights_version == 8


def test_full_queue_is_refused_with_resource_exhausted():
    inference = BatchingInference(SMALL, torch.device("cpu"), max_batch=4, max_delay_s=0.0, max_queue=1)
    # never published: the batcher does not take requests, so the queue stays full
    observations = _observations(1, 7, seed=4)
    first = threading.Thread(target=lambda: _swallow(inference, observations), daemon=True)
    first.start()
    for _ in range(100):
        if inference._queue.full():
            break
        threading.Event().wait(0.01)
    with pytest.raises(Overloaded, match="queue full"):
        inference.act(_records(observations), greedy=False, timeout_s=1.0)
    inference.close()


def _swallow(inference, observations):
    with contextlib.suppress(TimeoutError):
        inference.act(_records(observations), greedy=False, timeout_s=2.0)


def test_a_restarted_learner_continues_after_the_published_version(redis_client):
    from services.learner.training import continue_published_version

    learner = Learner(SMALL, device="cpu", seed=0)
    learner.weights_version = 40  # as restored from a checkpoint
    continue_published_version(learner, redis_client, "test:weights")  # nothing published: unchanged
    assert learner.weights_version == 40
    redis_client.set("test:weights:version", 47)  # what the last run served
    continue_published_version(learner, redis_client, "test:weights")
    assert learner.weights_version == 48
    continue_published_version(learner, redis_client, "test:weights")  # already past it: unchanged
    assert learner.weights_version == 48


def test_states_of_another_feature_set_are_refused_naming_the_columns(endpoint):
    """Basic states (3 move columns) sent to a network that reads the rich set (15) fail that request."""
    stub, _, _ = endpoint
    with pytest.raises(grpc.RpcError) as raised:
        _act(stub, _observations(2, 9, seed=3, rich=False))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        "the states carry 1 edge feature columns, the network reads 3; "
        "3 move feature columns, the network reads 15"
    )
    assert _act(stub, _observations(2, 9, seed=4)).actions.shape == [2]  # the endpoint goes on


def test_a_full_queue_is_resource_exhausted_over_grpc_and_the_waiting_call_is_answered_later():
    learner = Learner(SMALL, device="cpu", seed=0)
    inference = BatchingInference(SMALL, torch.device("cpu"), max_batch=4, max_delay_s=0.0, max_queue=1)
    server = InferenceServer(inference, "127.0.0.1", 0)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = inference_pb2_grpc.InferenceServiceStub(channel)
    observations = _observations(1, 7, seed=5)
    try:
        # nothing published yet: the batcher takes no request, so the first call fills the queue and waits
        first = threading.Thread(target=lambda: answers.append(_act(stub, observations)), daemon=True)
        answers: list = []
        first.start()
        for _ in range(500):
            if inference._queue.full():
                break
            time.sleep(0.01)
        with pytest.raises(grpc.RpcError) as refused:
            _act(stub, observations)
        assert (
            refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            and "queue full" in refused.value.details()
        )
        inference.publish(learner.policy_weights(), learner.alpha, 3)
        first.join(30)
        assert [a.weights_version for a in answers] == [3]
        with pytest.raises(grpc.RpcError) as empty:
            _call(stub, inference_pb2.ActRequest(actor_id="t"), timeout=10)
        assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "states" in empty.value.details()
    finally:
        channel.close()
        server.stop(1.0)
        inference.close()


def test_an_answer_after_the_server_stopped_leaves_the_batcher_serving():
    learner = Learner(SMALL, device="cpu", seed=0)
    inference = BatchingInference(SMALL, torch.device("cpu"), max_batch=4, max_delay_s=0.0, max_queue=4)
    server = InferenceServer(inference, "127.0.0.1", 0)
    server.start()
    observations = _observations(1, 7, seed=6)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = inference_pb2_grpc.InferenceServiceStub(channel)
            # nothing published: the call waits in the queue until its deadline
            with pytest.raises(grpc.RpcError):
                _call(stub, _request(observations), timeout=0.5)
        assert inference._queue.qsize() == 1
        server.stop(0.5)  # the event loop is closed; the queued call's answer has nowhere to go
        inference.publish(learner.policy_weights(), learner.alpha, 2)
        for _ in range(500):
            if inference._queue.empty():
                break
            time.sleep(0.01)
        time.sleep(0.2)
        assert inference._thread.is_alive()
        assert inference.act(_records(observations), greedy=True, timeout_s=30)[3] == 2
    finally:
        inference.close()


def test_each_publication_answers_as_networks_built_from_its_weights(endpoint):
    """Version by version, the answers are those of the published weights, and the networks a batch ran on are
    never written again."""
    from phylorl.agent.acting import policy_networks
    from phylorl.nets.twin import twin_or_none

    stub, inference, _ = endpoint
    observations = _observations(3, 9, seed=5)
    graphs, acts = state_inputs(observations)
    before = inference.snapshot
    kept = [p.clone() for p in before.pair[0].parameters()]
    for version in range(10, 14):
        weights = Learner(SMALL, device="cpu", seed=version).policy_weights()
        inference.publish(weights, 0.05, version)
        with torch.no_grad():
            expected = twin_or_none(policy_networks(SMALL, weights), frozen=True)(graphs, acts).numpy()
        reply = _act(stub, observations, greedy=True)
        assert reply.weights_version == version
        start = 0
        for i, obs in enumerate(observations):
            assert codec.ndarray_from_proto(reply.q)[i] == pytest.approx(
                float(expected[start : start + obs.n_actions].max()), rel=1e-6
            )
            start += obs.n_actions
    assert all(torch.equal(a, b) for a, b in zip(kept, before.pair[0].parameters()))


def test_the_padded_graph_path_answers_as_the_plain_one_and_counts_its_batches():
    """``cuda_graphs`` on a CPU runs the graphed path eagerly (states padded to a bucket, one staged block,
    the endpoint's own network pair loaded from each publication): its greedy answers equal the plain
    endpoint's."""
    learner = Learner(SMALL, device="cpu", seed=4)
    plain = BatchingInference(SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.0, max_queue=8)
    padded = BatchingInference(
        SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.0, max_queue=8, cuda_graphs=True
    )
    eager = metrics.INFERENCE_BATCHES.labels("eager")
    try:
        for version, seed in ((1, 4), (2, 9)):
            weights = Learner(SMALL, device="cpu", seed=seed).policy_weights()
            for endpoint in (plain, padded):
                endpoint.publish(weights, learner.alpha, version)
            observations = _observations(3, 9, seed=version)  # 3 states: padded to 4
            before = eager._value.get()
            got = padded.act(_records(observations), greedy=True, timeout_s=30)
            assert eager._value.get() == before + 1  # one network call (a CPU never replays a graph)
            want = plain.act(_records(observations), greedy=True, timeout_s=30)
            assert eager._value.get() == before + 2 and got[3] == want[3] == version
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-6)
    finally:
        plain.close()
        padded.close()


def test_a_state_without_moves_fails_its_own_request_naming_it():
    """A 3-taxon tree has no SPR move: the request holding it is refused at once; the endpoint goes on."""
    learner = Learner(SMALL, device="cpu", seed=0)
    inference = BatchingInference(
        SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.0, max_queue=8, cuda_graphs=True
    )
    inference.publish(learner.policy_weights(), learner.alpha, 1)
    try:
        with pytest.raises(ValueError, match="state 1 of 2: it has no move to choose from"):
            inference.act(
                _records(_observations(1, 8, seed=1) + _observations(1, 3, seed=1)), greedy=True, timeout_s=30
            )
        assert inference.act(_records(_observations(2, 8, seed=2)), greedy=True, timeout_s=30)[3] == 1
    finally:
        inference.close()
