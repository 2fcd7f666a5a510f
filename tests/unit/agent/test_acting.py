"""Acting: the twin networks' choice per state, and the endpoint's batches assembled in one pass (bit for bit
the requests' states collated at once, the last one repeated, layout for layout)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from oracles.network import q_values

from phylorl.agent.acting import _on_host, answers_on_host, assemble, select_actions
from phylorl.agent.transfer import Stager
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch, map_tensors
from phylorl.nets.qnet import QNetwork
from phylorl.nets.segment import Segments
from phylorl.nets.synthetic import random_observation
from phylorl.records.collate import state_inputs

CFG = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32)


def twins():
    torch.manual_seed(0)
    return QNetwork(CFG).eval(), QNetwork(CFG).eval()


def per_state_q(nets, obs):
    """min(Q1, Q2) of each observation's actions, computed one observation at a time."""
    out = []
    for o in obs:
        g, a = state_inputs([o])
        with torch.no_grad():
            out.append(torch.minimum(q_values(nets[0], g, a), q_values(nets[1], g, a)).numpy())
    return out


def test_greedy_picks_the_best_action_of_each_state_and_reports_v():
    rng = np.random.default_rng(0)
    obs = [random_observation(n, rng) for n in (5, 8, 6, 7)]
    nets, alpha = twins(), 0.05
    action, q, v = select_actions(nets, *state_inputs(obs), alpha=alpha, greedy=True)
    for i, qs in enumerate(per_state_q(nets, obs)):
        assert int(action[i]) == int(np.argmax(qs))
        assert float(q[i]) == pytest.approx(float(qs.max()), rel=1e-5)
        v_hand = alpha * math.log(sum(math.exp(x / alpha) for x in qs.astype(np.float64)))
        assert float(v[i]) == pytest.approx(v_hand, rel=1e-5)


def test_sampling_follows_the_softmax_policy():
    rng = np.random.default_rng(1)
    obs = random_observation(5, rng)  # 6 actions
    nets = twins()
    qs = per_state_q(nets, [obs])[0].astype(np.float64)
    alpha = float(qs.std())  # a temperature at which no action dominates
    p = np.exp((qs - qs.max()) / alpha)
    p /= p.sum()
    n = 4000
    gen = torch.Generator().manual_seed(2)
    action, q, _ = select_actions(nets, *state_inputs([obs] * n), alpha=alpha, greedy=False, generator=gen)
    freq = np.bincount(action.numpy(), minlength=len(qs)) / n
    assert np.abs(freq - p).max() < 4 * np.sqrt(p * (1 - p) / n).max()
    np.testing.assert_allclose(q.numpy(), qs[action.numpy()], rtol=1e-5)


def test_select_actions_checks_its_inputs():
    rng = np.random.default_rng(2)
    obs = random_observation(5, rng)
    nets = twins()
    nets[0].train()
    with pytest.raises(ValueError, match="eval mode"):
        select_actions(nets, *state_inputs([obs]), alpha=0.1, greedy=True)
    nets[0].eval()
    graphs, actions = state_inputs([obs, obs])
    k = obs.n_actions  # the second state's moves taken away
    first_only = ActionBatch(
        actions.nodes[:k],
        actions.meta[:k],
        Segments(torch.zeros(k, dtype=torch.int64), torch.tensor([k, 0]), 2, None),
    )
    with pytest.raises(ValueError, match="at least one action"):
        select_actions(nets, graphs, first_only, alpha=0.1, greedy=True)


def test_the_answers_of_a_padded_batch_come_to_the_host_in_one_compiled_call():
    chosen, q, v = torch.arange(12), torch.rand(12), torch.rand(12, dtype=torch.float64)
    got = answers_on_host(chosen, q, v, 5)
    for g, t in zip(got, (chosen, q, v)):
        assert g.device.type == "cpu" and g.dtype == t.dtype and torch.equal(g, t[:5])
    assert isinstance(_on_host(), torch.jit.ScriptFunction)  # one call, not six
    # the arguments kept to the end of the call (phylorl/nets/one_call.py)
    kept = _on_host()(chosen, q, v, 5)[3]
    assert [t.data_ptr() for t in kept] == [t.data_ptr() for t in (chosen, q, v)]


def _requests(sizes_per_request, seed=0):
    """Each request's observations."""
    rng = np.random.default_rng(seed)
    return [[random_observation(n, rng) for n in sizes] for sizes in sizes_per_request]


def _flat(obj) -> list:
    found = []
    map_tensors(obj, lambda t: found.append(t) or t)
    return found


@pytest.mark.parametrize(
    "sizes, count",
    [
        ([[9, 12], [7], [12, 12, 10]], 8),  # mixed sizes, padded with 2 copies
        ([[20, 20, 20, 20], [20, 20, 20, 20]], 8),  # the design size, uniform, no padding
        ([[20, 20, 20, 20]] * 3, 16),  # uniform, padded
        ([[6]], 1),
        ([[8, 11]], 5),
    ],
)
def test_assembly_equals_collating_everything_at_once_with_the_last_state_repeated(sizes, count):
    requests = _requests(sizes)
    parts = [state_inputs(r) for r in requests]
    everything = [o for r in requests for o in r]
    want = Stager().stage(state_inputs(everything + [everything[-1]] * (count - len(everything))))
    stager = Stager()
    for _ in range(2):  # the second time into the views made the first time
        got = assemble(parts, count, stager)
        assert got.packed == want.packed
        for g, w in zip(_flat(got.unpack()), _flat(want.unpack())):
            assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)


def test_a_batch_smaller_than_its_states_is_refused():
    with pytest.raises(ValueError, match="cannot assemble 3 states into a batch of 2"):
        assemble([state_inputs(r) for r in _requests([[8, 9, 10]])], 2, Stager())
