"""The learner service's loop and checkpoints against real servers: a replay service on a real Redis, the
real batching inference endpoint, Redis for the published weights, checkpoint files on disk."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import torch
from helpers import serve_replay
from prometheus_client import REGISTRY

from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_transition
from phylorl.phylo.simulate import simulate_dataset
from phylorl.records.codec import encode_transition
from phylorl.replay import RateLimiter
from phylorl.types import Transition
from services.learner.config import LearnerConfig
from services.learner.inference import BatchingInference
from services.learner.training import PREFETCH_DEPTH, Checkpoints, TrainingLoop, continue_published_version
from services.replay.client import ReplayClient

NET = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


@pytest.fixture
def replay(redis_client):
    table, server = serve_replay(
        redis_client, "test:loop", capacity=1000, limiter=RateLimiter(16, 0.0), seed=3, max_workers=8
    )
    rng = np.random.default_rng(0)
    client = ReplayClient(f"127.0.0.1:{server.port}")
    # acted by weights versions 0 and 1, or unknown (-1: no policy lag)
    acted = [dataclasses.replace(random_transition(7, rng), policy_version=i % 3 - 1) for i in range(64)]
    client.insert_records([encode_transition(t) for t in acted], np.ones(64))
    yield table, client, f"127.0.0.1:{server.port}"
    client.close()
    server.stop(grace_s=1.0)


def test_the_loop_updates_from_replay_publishes_sends_priorities_and_checkpoints(
    replay, redis_client, tmp_path
):
    table, client, address = replay
    config = LearnerConfig(
        run_dir=str(tmp_path),
        batch_size=16,
        updates=12,
        publish_every=5,
        checkpoint_every=4,
        checkpoint_seconds=0,
        keep_checkpoints=2,
        prefetch_workers=1,
        weights_key="phylorl:w",
        replay_address=address,
    )
    learner = Learner(NET, AgentConfig(), device="cpu", seed=0)
    inference = BatchingInference(NET, torch.device("cpu"), max_batch=4, max_delay_s=0.001, max_queue=8)
    checkpoints = Checkpoints(tmp_path, config.keep_checkpoints)
    loop = TrainingLoop(config, learner, client, inference, redis_client, checkpoints, threading.Event())
    lags = _lags()
    try:
        loop.run()
    finally:
        inference.close()
    assert learner.updates == loop.updates_done == 12 and learner.weights_version == 12
    # each drawn transition of a known version observed its lag (the learner's version then, 0..12, less 0 or
    # 1)
    count, total = (after - before for after, before in zip(_lags(), lags))
    assert 16 <= count <= 16 * (12 + PREFETCH_DEPTH + 2) and -count <= total <= 12 * count
    assert (
        REGISTRY.get_sample_value("phylorl_learner_policy_lag_versions_bucket", {"le": "+Inf"}) or 0
    ) >= count
    rows = (tmp_path / "learner" / "updates.csv").read_text().splitlines()
    assert len(rows) == 13 and [int(r.split(",")[0]) for r in rows[1:]] == list(range(1, 13))
    assert inference.snapshot.version == 12 and int(redis_client.get("phylorl:w:version")) == 12
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("learner-*.pt"))
    assert names == ["learner-000000008.pt", "learner-000000012.pt"]  # every 4 updates and at the end, 2 kept
    assert checkpoints.latest().name == "learner-000000012.pt"
    _, priorities = table.priorities()
    assert np.count_nonzero(priorities != 1.0) > 0  # the learner's |TD| priorities reached the service

    restored = Learner.restore(checkpoints.latest())
    assert restored.updates == 12 and restored.weights_version == 12
    for a, b in zip(learner.policy_weights()["q1"].values(), restored.policy_weights()["q1"].values()):
        assert torch.equal(a, b)


def _lags() -> tuple[float, float]:
    """The learner's policy-lag histogram so far: observations and their sum."""
    name = "phylorl_learner_policy_lag_versions"
    return REGISTRY.get_sample_value(f"{name}_count") or 0.0, REGISTRY.get_sample_value(f"{name}_sum") or 0.0


@pytest.mark.parametrize("features", ["basic", "rich"])
def test_environment_records_train_and_a_corrupt_one_is_retired(redis_client, tmp_path, features):
    """Records an actor makes train the learner; a batch that draws a corrupt record (damaged at rest) leaves
    it out and retires it (priority 0)."""
    alignment = simulate_dataset(9, 300, np.random.default_rng(1)).alignment
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "a")],
        EnvConfig(horizon=5, features=features),
        seed=0,
    )
    rng = np.random.default_rng(2)
    obs, _ = env.reset()
    records = []
    for _ in range(40):
        action = int(rng.integers(obs.n_actions))
        nxt, reward, _, truncated, _ = env.step(action)
        records.append(encode_transition(Transition(obs, action, reward, nxt, False, truncated, 0.99)))
        obs = env.reset()[0] if truncated else nxt
    records.append(records[0][:-3])  # truncated: does not decode
    table, server = serve_replay(
        redis_client,
        f"test:paths:{features}",
        capacity=100,
        limiter=RateLimiter(16, 0.0),
        seed=3,
        max_workers=8,
    )
    client = ReplayClient(f"127.0.0.1:{server.port}")
    client.insert_records(records[:-1], np.ones(len(records) - 1))
    # damaged at rest (the service checks what it is sent); drawn first
    table.insert(records[-1:], np.array([1e6]))
    net = NetworkConfig(features=features, hidden=16, action_hidden=16, head_hidden=16)
    config = LearnerConfig(
        run_dir=str(tmp_path),
        batch_size=8,
        updates=6,
        publish_every=5,
        checkpoint_every=0,
        checkpoint_seconds=0,
        prefetch_workers=1,
        weights_key=f"phylorl:paths:{features}",
        replay_address=f"127.0.0.1:{server.port}",
    )
    corrupt = REGISTRY.get_sample_value("phylorl_learner_corrupt_records_total") or 0.0
    inference = BatchingInference(net, torch.device("cpu"), max_batch=4, max_delay_s=0.001, max_queue=8)
    loop = TrainingLoop(
        config,
        Learner(net, device="cpu", seed=0),
        client,
        inference,
        redis_client,
        Checkpoints(tmp_path, 1),
        threading.Event(),
    )
    try:
        loop.run()
    finally:
        inference.close()
        client.close()
        server.stop(grace_s=1.0)
    assert loop.updates_done == 6
    assert REGISTRY.get_sample_value("phylorl_learner_corrupt_records_total") > corrupt  # counted as drawn
    keys, left = table.priorities()
    assert left[np.argmax(keys)] == 0.0


def test_checkpoints_keep_the_newest_and_a_dangling_latest_means_none(tmp_path):
    learner = Learner(NET, device="cpu", seed=0)
    checkpoints = Checkpoints(tmp_path, keep=2)
    assert checkpoints.latest() is None
    for version in (3, 7, 11):
        learner.weights_version = version
        checkpoints.save(learner)
    assert sorted(p.name for p in checkpoints.directory.glob("*.pt")) == [
        "learner-000000007.pt",
        "learner-000000011.pt",
    ]
    assert checkpoints.latest().name == "learner-000000011.pt"
    checkpoints.latest().unlink()
    assert checkpoints.latest() is None  # start afresh rather than fail


def test_a_restart_goes_on_after_the_published_version(redis_client):
    learner = Learner(NET, device="cpu", seed=0)
    learner.weights_version = 40  # the last checkpoint
    redis_client.set("phylorl:v:version", 45)  # published after it, before the kill
    continue_published_version(learner, redis_client, "phylorl:v")
    assert learner.weights_version == 46 and learner.updates == 0
