"""The actor against a real inference endpoint: a transient status is retried, anything else stops it.

The endpoint's network reads the basic observation while the actor sends the rich one, so every Act call
is answered INVALID_ARGUMENT (a real misconfiguration, not a fault injected by a test double): retrying it
would loop forever, so the actor must stop with the error at once.
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest
import torch

from phylorl.agent.learner import Learner
from phylorl.env import EnvAlignment, EnvConfig, VecTreeEnv, prepare_alignment
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from services.actor import metrics
from services.actor.actor import Actor
from services.actor.config import ActorConfig
from services.learner.inference import BatchingInference
from services.learner.server import InferenceServer
from services.replay.client import ReplayClient

BASIC = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


@pytest.fixture()
def basic_endpoint():
    learner = Learner(BASIC, device="cpu", seed=0)
    inference = BatchingInference(BASIC, torch.device("cpu"), max_batch=8, max_delay_s=0.001, max_queue=8)
    inference.publish(learner.policy_weights(), learner.alpha, 1)
    server = InferenceServer(inference, "127.0.0.1", 0)
    server.start()
    server.set_serving()
    yield f"127.0.0.1:{server.port}"
    server.stop(1.0)
    inference.close()


def test_a_non_transient_status_stops_the_actor_instead_of_retrying(basic_endpoint, free_port_factory):
    data = simulate_dataset(6, 100, dataset_rng(3, 0), model=parse_model("JC"))
    entry = EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")
    envs = VecTreeEnv([entry], 1, EnvConfig(horizon=4, features="rich"), seed=0)
    config = ActorConfig(learner_address=basic_endpoint, replay_address=f"127.0.0.1:{free_port_factory()}",
                         alignments="unused", metrics_port=0, backoff_max_s=0.2, rpc_timeout_s=10.0)
    reconnects = metrics.RECONNECTS.labels("inference")._value.get()
    stop = threading.Event()
    channel = grpc.insecure_channel(basic_endpoint)
    actor = Actor(config, envs, channel, ReplayClient(config.replay_address), stop)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as raised:
        actor.run()
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "edge feature columns" in raised.value.details()  # the endpoint says what is wrong
    assert time.monotonic() - started < 10.0 and actor.steps == 0
    assert metrics.RECONNECTS.labels("inference")._value.get() == reconnects  # not retried
    channel.close()
