"""The inference endpoint on a GPU (its own high-priority stream, networks written again at each publication)
answers as networks built anew from the published weights, while a learner on the GPU keeps updating on the
default stream (needs a CUDA device: skipped elsewhere; run on a lent GPU machine with ``pytest tests/gpu``)."""

import threading

import numpy as np
import pytest
import torch

from phylorl.agent.acting import policy_networks
from phylorl.agent.learner import Learner
from phylorl.env import build_observation
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import collate_observations
from phylorl.nets.twin import twin_or_none
from phylorl.phylo import enumerate_moves, move_metadata, random_tree
from services.learner.inference import BatchingInference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
NET = NetworkConfig(hidden=64, action_hidden=64, head_hidden=64)


def test_answers_on_the_gpu_follow_each_publication_while_the_default_stream_is_busy():
    rng = np.random.default_rng(0)
    observations = []
    for _ in range(4):
        tree = random_tree([f"t{i}" for i in range(12)], rng)
        moves = enumerate_moves(tree)
        observations.append(build_observation(tree, moves, move_metadata(tree, moves)))
    graphs, actions = collate_observations(observations)
    device = torch.device("cuda")
    inference = BatchingInference(NET, device, max_batch=16, max_delay_s=0.001, max_queue=16)
    busy = torch.randn(4096, 4096, device=device)
    stop = threading.Event()

    def load():  # the learner's side: long kernels queued on the default stream all along
        while not stop.is_set():
            busy.copy_(busy @ busy / 4096.0)
            torch.cuda.synchronize()

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        for version in range(1, 7):
            weights = Learner(NET, device=device, seed=version).policy_weights(device)
            inference.publish(weights, 0.05, version)
            with torch.no_grad():
                expected = twin_or_none(policy_networks(NET, weights, "cpu"), frozen=True)(graphs, actions).numpy()
            chosen, q, _, answered = inference.act(observations, greedy=True, timeout_s=60)
            assert answered == version
            start = 0
            for i, obs in enumerate(observations):
                mine = expected[start:start + obs.n_actions]
                best = pytest.approx(float(mine.max()), rel=1e-4, abs=1e-5)  # CPU and GPU sums differ in order
                assert q[i] == best and float(mine[chosen[i]]) == best
                start += obs.n_actions
    finally:
        stop.set()
        worker.join(10)
        inference.close()
