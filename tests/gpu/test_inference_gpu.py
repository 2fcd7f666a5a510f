"""The inference endpoint on a GPU (its own high-priority stream, networks built at each publication, answers
eager or replayed as CUDA graphs) answers as networks built anew from the published weights, while a learner
on the GPU keeps updating on the default stream; a captured answer equals the eager one (needs a CUDA device:
skipped elsewhere; run on a lent GPU machine with ``pytest tests/gpu``)."""

import threading

import numpy as np
import pytest
import torch

from phylorl.agent.acting import policy_networks, select_actions
from phylorl.agent.capture import WARMUP, GraphedActing, bucket
from phylorl.agent.learner import Learner
from phylorl.agent.transfer import Stager
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import move_to
from phylorl.nets.synthetic import random_observation
from phylorl.nets.twin import twin_or_none
from phylorl.records.codec import encode_observation
from phylorl.records.collate import state_inputs
from phylorl.records.format import PackedRecords
from services.learner.inference import BatchingInference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
NET = NetworkConfig(hidden=64, action_hidden=64, head_hidden=64)


def _observations(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [random_observation(n, rng) for n in sizes]


@pytest.mark.parametrize("fused", [False, True])
def test_a_captured_answer_equals_the_eager_one_and_follows_new_weights(fused):
    device = torch.device("cuda")
    observations = _observations([12, 9, 12, 15, 7])
    inputs = state_inputs(observations)
    padded = state_inputs(observations + [observations[-1]] * (bucket(len(observations), 64) - 5))
    acting = GraphedActing(NET, device, fused=fused)
    stager = Stager(pinned=True)
    k = len(observations)
    for version in (1, 2, 3):
        weights = Learner(NET, device=device, seed=version).policy_weights(device)
        pair = policy_networks(NET, weights, device)
        acting.load(pair, 0.05 * version, version)
        twin = twin_or_none(pair, frozen=True)
        want = select_actions(twin, *move_to(inputs, device), 0.05 * version, greedy=True)
        for _ in range(WARMUP + 2):  # eager until the shape is captured, then replays
            chosen, q, v = (t[:k].clone() for t in acting(stager.stage(padded), greedy=True))
            torch.cuda.current_stream().synchronize()
            assert torch.equal(chosen, want[0])
            assert torch.allclose(q, want[1], rtol=1e-5, atol=1e-5) and torch.allclose(
                v, want[2], rtol=1e-5, atol=1e-5
            )
        generator = torch.Generator(device=device).manual_seed(version)
        sampled = []
        for _ in range(4):
            sampled.append(acting(stager.stage(padded), greedy=False, generator=generator)[0][:k].clone())
            torch.cuda.current_stream().synchronize()  # before the pinned block is written again
        generator.manual_seed(version)
        device_padded = move_to(padded, device)
        expected = [
            select_actions(twin, *device_padded, 0.05 * version, greedy=False, generator=generator)[0][:k]
            for _ in range(4)
        ]
        # the same noise draws the same moves
        assert all(torch.equal(a, b) for a, b in zip(sampled, expected))
    assert len(acting.captured) == 2  # one shape, greedy and sampled
    assert acting.replays >= 3 * WARMUP  # answers after the captures were replays


def _assert_answers(inference, observations, weights, version, alpha=None):
    """The endpoint's greedy answers to ``observations`` are those of networks built anew from ``weights``
    (and with ``alpha``, their soft values those of that temperature)."""
    graphs, actions = state_inputs(observations)
    with torch.no_grad():
        expected = twin_or_none(policy_networks(NET, weights, "cpu"), frozen=True)(graphs, actions).numpy()
    states = PackedRecords.from_records([encode_observation(o) for o in observations])
    chosen, q, v, answered = inference.act(states, greedy=True, timeout_s=60)
    assert answered == version
    start = 0
    for i, obs in enumerate(observations):
        mine = expected[start : start + obs.n_actions]
        best = pytest.approx(float(mine.max()), rel=1e-4, abs=1e-5)  # CPU and GPU sums differ in order
        assert q[i] == best and float(mine[chosen[i]]) == best
        if alpha is not None:
            soft = alpha * np.logaddexp.reduce(mine.astype(np.float64) / alpha)
            assert v[i] == pytest.approx(soft, rel=1e-4, abs=1e-5)
        start += obs.n_actions


@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_answers_on_the_gpu_follow_each_publication_while_the_default_stream_is_busy(cuda_graphs):
    observations = _observations([12] * 4)
    device = torch.device("cuda")
    inference = BatchingInference(
        NET, device, max_batch=16, max_delay_s=0.001, max_queue=16, cuda_graphs=cuda_graphs
    )
    busy = torch.randn(4096, 4096, device=device)
    stop = threading.Event()

    def load():  # the learner's side: long kernels queued on the default stream all along, waited for as the
        # learner waits (on its stream; its device-wide waits are those before its own captures, under
        # CAPTURE_LOCK)
        while not stop.is_set():
            busy.copy_(busy @ busy / 4096.0)
            torch.cuda.current_stream().synchronize()

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        for version in range(1, 7):
            weights = Learner(NET, device=device, seed=version).policy_weights(device)
            inference.publish(weights, 0.05, version)
            _assert_answers(inference, observations, weights, version)
    finally:
        stop.set()
        worker.join(10)
        inference.close()


@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_a_publication_of_live_parameters_is_taken_before_the_next_update_changes_them(cuda_graphs):
    """The training loop publishes the learner's own parameters (``policy_tensors``): the endpoint's copies
    are queued on the learner's stream, so the update queued right after them changes the parameters only
    after they are taken, and the answers are the published weights'."""
    observations = _observations([11] * 3, seed=2)
    device = torch.device("cuda")
    learner = Learner(NET, device=device, seed=0)
    inference = BatchingInference(
        NET, device, max_batch=8, max_delay_s=0.001, max_queue=8, cuda_graphs=cuda_graphs
    )
    busy = torch.randn(4096, 4096, device=device)
    try:
        for version in range(1, 6):
            fresh = Learner(NET, device=device, seed=version)
            with torch.no_grad():  # this version's weights (the last loop's +1000 undone)
                for mine, theirs in ((learner.q1, fresh.q1), (learner.q2, fresh.q2)):
                    for p, q in zip(mine.parameters(), theirs.parameters()):
                        p.copy_(q)
            published = learner.policy_weights("cpu")  # copies
            with torch.no_grad():
                learner.log_alpha.fill_(np.log(0.05))
            busy.copy_(busy @ busy / 4096.0)  # the stream is busy when the copies are queued
            # the temperature as the training loop hands it over: a tensor computed on the learner's stream
            inference.publish(learner.policy_tensors(), learner.policy_alpha(), version)
            with torch.no_grad():  # the next update, queued at once on the same stream
                for p in (*learner.q1.parameters(), *learner.q2.parameters()):
                    p.add_(1000.0)
                learner.log_alpha.add_(1.0)
            _assert_answers(inference, observations, published, version, alpha=0.05)
    finally:
        inference.close()
