"""The actor's pipeline against a real inference endpoint and a real replay service: while one group of its
environments waits for its answer, the actor steps the other, so one actor's calls overlap."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
import torch
from helpers import serve_replay
from prometheus_client import REGISTRY

from phylorl.agent.learner import Learner
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment
from phylorl.env.vec_env import VecTreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from services.actor import metrics as actor_metrics
from services.actor.actor import RETRYABLE, Actor, transient
from services.actor.config import ActorConfig
from services.learner import metrics  # noqa: F401  (the endpoint's metrics, read below)
from services.learner.inference import BatchingInference
from services.learner.server import InferenceServer
from services.replay.client import ReplayClient

RICH = NetworkConfig(features="rich", hidden=16, action_hidden=16, head_hidden=16)


def served() -> tuple[float, float]:
    """Requests answered and network batches run by the endpoints of this process so far."""
    return (
        REGISTRY.get_sample_value("phylorl_inference_requests_total") or 0.0,
        REGISTRY.get_sample_value("phylorl_inference_batch_size_count") or 0.0,
    )


@pytest.mark.parametrize("pipeline", [1, 2])
def test_a_pipelined_actors_calls_overlap_and_every_environment_steps(
    pipeline, redis_client, free_port_factory, inference_factory
):
    # the endpoint holds a batch open for 1 s unless 4 states come: only calls in flight together can share
    # one
    endpoint = inference_factory(RICH, max_batch=4, max_delay_s=1.0)
    data = simulate_dataset(6, 100, dataset_rng(6, 0), model=parse_model("JC"))
    entry = EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")
    envs = VecTreeEnv([entry], 4, EnvConfig(horizon=3, features="rich"), seed=0)
    replay_port = free_port_factory()
    table, server = serve_replay(redis_client, f"test:pipeline{pipeline}", port=replay_port)
    config = ActorConfig(
        learner_address=endpoint,
        replay_address=f"127.0.0.1:{replay_port}",
        alignments="unused",
        metrics_port=0,
        rpc_timeout_s=30.0,
        send_batch=2,
        pipeline=pipeline,
        max_steps=4,
    )
    channel = grpc.insecure_channel(endpoint)
    before = served()
    try:
        actor = Actor(config, envs, channel, ReplayClient(config.replay_address), threading.Event())
        actor.run()
        requests, batches = (after - first for after, first in zip(served(), before))
        # each env: one episode of 3 steps, then one more step
        assert actor.steps == 4 and actor.episodes == 4
        # every finished episode's transitions were stored (the open ones never got their last value)
        assert actor.outbox.next_number == table.stats().size == 4 * 3
        assert requests == pipeline * 4
        if pipeline == 1:
            assert batches == requests  # one call at a time: a batch per call (of all 4 states)
        else:
            # two groups of 2: each group's call waits at the endpoint until the other group's joins it
            assert batches <= requests // 2 + 1
    finally:
        server.stop(grace_s=1.0)
        channel.close()


def _actor_against(redis_client, free_port_factory, prefix: str, seed: int, **options):
    """Two environments of a simulated 6-taxon alignment, a real replay service on a free port (prefix
    ``prefix``) and an actor config for an endpoint yet to come on another free port: ``(envs, endpoint_port,
    table, replay_server, config)``."""
    data = simulate_dataset(6, 100, dataset_rng(seed, 0), model=parse_model("JC"))
    entry = EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")
    envs = VecTreeEnv([entry], 2, EnvConfig(horizon=2, features="rich"), seed=0)
    endpoint_port, replay_port = free_port_factory(), free_port_factory()
    table, replay_server = serve_replay(redis_client, prefix, port=replay_port)
    config = ActorConfig(
        learner_address=f"127.0.0.1:{endpoint_port}",
        replay_address=f"127.0.0.1:{replay_port}",
        alignments="unused",
        metrics_port=0,
        backoff_max_s=0.2,
        send_batch=2,
        **options,
    )
    return envs, endpoint_port, table, replay_server, config


def test_pipelined_calls_to_an_absent_endpoint_are_retried_until_it_comes_up(redis_client, free_port_factory):
    """Both groups' first calls find nothing listening (UNAVAILABLE): each is retried with backoff, and once
    the endpoint is up on that address the actor takes all its steps."""
    envs, endpoint_port, table, replay_server, config = _actor_against(
        redis_client, free_port_factory, "test:absent", 7, rpc_timeout_s=10.0, pipeline=2, max_steps=3
    )
    reconnects = actor_metrics.RECONNECTS.labels("inference")._value.get()
    channel = grpc.insecure_channel(config.learner_address)
    actor = Actor(config, envs, channel, ReplayClient(config.replay_address), threading.Event())
    runner = threading.Thread(target=actor.run)
    runner.start()
    inference = server = None
    try:
        deadline = time.monotonic() + 60
        while actor_metrics.RECONNECTS.labels("inference")._value.get() < reconnects + 2:
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.05)
        assert actor.steps == 0
        learner = Learner(RICH, device="cpu", seed=0)
        inference = BatchingInference(RICH, torch.device("cpu"), max_batch=8, max_delay_s=0.001, max_queue=64)
        inference.publish(learner.policy_weights(), learner.alpha, 4)
        server = InferenceServer(inference, "127.0.0.1", endpoint_port)
        server.start()
        server.set_serving()
        runner.join(90)
        assert not runner.is_alive()
        assert actor.steps == 3 and actor.weights_version == 4
        # each environment's 2-step episode, its last value asked in step 3: 2 transitions each, stored once
        assert actor.outbox.next_number == table.stats().size == 4
    finally:
        actor.stop.set()
        runner.join(10)
        channel.close()
        if server is not None:
            server.stop(1.0)
        if inference is not None:
            inference.close()
        replay_server.stop(grace_s=1.0)


def _endpoint(port: int, publish: bool):
    inference = BatchingInference(RICH, torch.device("cpu"), max_batch=8, max_delay_s=0.001, max_queue=64)
    if publish:
        learner = Learner(RICH, device="cpu", seed=0)
        inference.publish(learner.policy_weights(), learner.alpha, 6)
    server = InferenceServer(inference, "127.0.0.1", port)
    server.start()
    server.set_serving()
    return inference, server


def test_a_call_in_flight_when_the_endpoint_shuts_down_is_retried_until_one_is_back(
    redis_client, free_port_factory
):
    """The learner stops (its update count reached, or restarted) while an actor's request waits at its
    endpoint: the server ends the stream when its grace is over. The actor is not stopping, so it retries on a
    new stream, and once an endpoint is back on that address it takes its steps."""
    envs, endpoint_port, table, replay_server, config = _actor_against(
        redis_client, free_port_factory, "test:cancelled", 8, rpc_timeout_s=30.0, max_steps=2
    )
    held, server = _endpoint(endpoint_port, publish=False)  # nothing published: the call waits in its queue
    channel = grpc.insecure_channel(config.learner_address)
    actor = Actor(config, envs, channel, ReplayClient(config.replay_address), threading.Event())
    errors: list[BaseException] = []

    def run() -> None:
        try:
            actor.run()
        except BaseException as error:  # noqa: BLE001  (asserted below)
            errors.append(error)

    runner = threading.Thread(target=run)
    runner.start()
    inference = None
    try:
        deadline = time.monotonic() + 60
        while held._queue.qsize() == 0:  # the actor's call is in flight, waiting at the endpoint
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.05)
        reconnects = actor_metrics.RECONNECTS.labels("inference")._value.get()
        server.stop(0.5)  # the call in flight is still waiting when the grace ends: cancelled
        held.close()
        while actor_metrics.RECONNECTS.labels("inference")._value.get() < reconnects + 1:
            assert time.monotonic() < deadline and not errors, errors
            time.sleep(0.05)
        inference, server = _endpoint(endpoint_port, publish=True)
        runner.join(90)
        assert not runner.is_alive() and not errors, errors
        assert actor.steps == 2 and actor.weights_version == 6
    finally:
        actor.stop.set()
        runner.join(10)
        channel.close()
        server.stop(1.0)
        if inference is not None:
            inference.close()
        replay_server.stop(grace_s=1.0)


def test_cancelled_is_transient_unless_the_actor_is_stopping():
    """A call the actor did not cancel itself (it is not stopping) was cancelled by a service going away (as
    when the learner stops at its update count): it is retried like UNAVAILABLE; while stopping it is the
    actor's own stop."""
    code = grpc.StatusCode
    assert transient(code.CANCELLED, stopping=False) and not transient(code.CANCELLED, stopping=True)
    assert all(transient(c, stopping) for c in RETRYABLE for stopping in (False, True))
    assert not any(
        transient(c, False)
        for c in (
            code.INVALID_ARGUMENT,
            code.INTERNAL,
            code.UNKNOWN,
            code.PERMISSION_DENIED,
            code.UNAUTHENTICATED,
        )
    )
