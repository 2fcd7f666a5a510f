import math

import numpy as np
import pytest
import torch

from phylorl.agent.acting import _on_host, answers_on_host, select_actions
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import collate_observations
from phylorl.nets.qnet import QNetwork
from phylorl.nets.synthetic import random_observation

CFG = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32)


def twins():
    torch.manual_seed(0)
    return QNetwork(CFG).eval(), QNetwork(CFG).eval()


def per_state_q(nets, obs):
    """min(Q1, Q2) of each observation's actions, computed one observation at a time."""
    out = []
    for o in obs:
        g, a = collate_observations([o])
        with torch.no_grad():
            out.append(torch.minimum(nets[0](g, a, fast=False), nets[1](g, a, fast=False)).numpy())
    return out


def test_greedy_picks_the_best_action_of_each_state_and_reports_v():
    rng = np.random.default_rng(0)
    obs = [random_observation(n, rng) for n in (5, 8, 6, 7)]
    nets, alpha = twins(), 0.05
    action, q, v = select_actions(nets, *collate_observations(obs), alpha=alpha, greedy=True)
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
    action, q, _ = select_actions(nets, *collate_observations([obs] * n), alpha=alpha, greedy=False, generator=gen)
    freq = np.bincount(action.numpy(), minlength=len(qs)) / n
    assert np.abs(freq - p).max() < 4 * np.sqrt(p * (1 - p) / n).max()
    np.testing.assert_allclose(q.numpy(), qs[action.numpy()], rtol=1e-5)


def test_select_actions_checks_its_inputs():
    rng = np.random.default_rng(2)
    obs = random_observation(5, rng)
    nets = twins()
    nets[0].train()
    with pytest.raises(ValueError, match="eval mode"):
        select_actions(nets, *collate_observations([obs]), alpha=0.1, greedy=True)
    nets[0].eval()
    empty = type(obs)(obs.node_features, obs.edge_index, obs.edge_attr, obs.actions[:0], obs.action_meta[:0])
    with pytest.raises(ValueError, match="at least one action"):
        select_actions(nets, *collate_observations([obs, empty]), alpha=0.1, greedy=True)


def test_the_answers_of_a_padded_batch_come_to_the_host_in_one_compiled_call():
    chosen, q, v = torch.arange(12), torch.rand(12), torch.rand(12, dtype=torch.float64)
    got = answers_on_host(chosen, q, v, 5)
    for g, t in zip(got, (chosen, q, v)):
        assert g.device.type == "cpu" and g.dtype == t.dtype and torch.equal(g, t[:5])
    assert isinstance(_on_host(), torch.jit.ScriptFunction)  # one call, not six
    kept = _on_host()(chosen, q, v, 5)[3]  # the arguments kept to the end of the call (phylorl/nets/one_call.py)
    assert [t.data_ptr() for t in kept] == [t.data_ptr() for t in (chosen, q, v)]
