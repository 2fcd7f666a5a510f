import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
from helpers import batch_of
from oracles.features import observation_arrays
from oracles.network import q_values

from phylorl.agent.acting import policy_networks
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import METRIC_NAMES, Learner
from phylorl.agent.learner_setup import with_index
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_transition
from phylorl.records.collate import state_inputs

SMALL = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32)
BASIC = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32, features="basic")


def toy_batches(count, sizes=(5, 7, 6, 5), seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        trs = [random_transition(n, rng, next_taxa=n + (i % 2)) for i, n in enumerate(sizes)]
        out.append(batch_of(trs, weights=rng.uniform(0.2, 1.0, len(trs))))
    return out


def all_tensors(learner):
    state = learner.state_dict()
    flat = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            flat.append(x)
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(state)
    return flat


def test_restored_learner_continues_bit_for_bit(tmp_path):
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        cfg = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32, dropout=0.3)
        batches = toy_batches(5)
        learner = Learner(cfg, AgentConfig(lr=1e-3, tau=0.1), seed=3)
        for b in batches[:2]:
            learner.step(b)
        path = tmp_path / "ckpt.pt"
        learner.save(path)
        assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left behind
        torch.load(path, weights_only=True)  # only tensors and plain containers
        restored = Learner.restore(path)
        assert restored.weights_version == learner.weights_version == 2
        for b in batches[2:]:
            m1, p1 = learner.step(b)
            m2, p2 = restored.step(b)
            assert m1 == m2
            np.testing.assert_array_equal(p1, p2)
        mine, theirs = all_tensors(learner), all_tensors(restored)
        assert len(mine) == len(theirs) > 50
        assert all(torch.equal(a, b) for a, b in zip(mine, theirs))
    finally:
        torch.use_deterministic_algorithms(was)


def test_restore_rejects_a_different_network(tmp_path):
    learner = Learner(SMALL)
    learner.save(tmp_path / "c.pt")
    other = Learner(NetworkConfig(hidden=16, heads=4, action_hidden=16, head_hidden=32))
    with pytest.raises(ValueError, match="different NetworkConfig"):
        other.load_state_dict(torch.load(tmp_path / "c.pt", weights_only=True))


def test_priorities_and_targets_match_a_per_transition_computation():
    """Recompute y = r + d (1 - terminal) alpha log sum exp(min(Q1', Q2') / alpha) one transition at a
    time with the reference path, and |y - q1| + |y - q2| from it."""
    rng = np.random.default_rng(5)
    trs = [random_transition(n, rng, next_taxa=m) for n, m in ((5, 6), (7, 4), (6, 6), (4, 8))]
    trs[0].terminal, trs[1].terminal, trs[1].truncated = True, False, True
    learner = Learner(SMALL, AgentConfig(initial_alpha=0.3))
    before = copy.deepcopy(learner)
    alpha = 0.3
    _, priorities = learner.step(batch_of(trs))
    want = []
    for t in trs:
        with torch.no_grad():
            nxt = state_inputs([t.next_obs])
            q_next = torch.minimum(q_values(before.target1, *nxt), q_values(before.target2, *nxt))
            v = alpha * math.log(sum(math.exp(q / alpha) for q in q_next.tolist()))
            y = t.reward + (0.0 if t.terminal else t.discount * v)
            graphs, actions = state_inputs([t.obs])
            q1 = q_values(before.q1, graphs, actions)[t.action].item()
            q2 = q_values(before.q2, graphs, actions)[t.action].item()
        want.append(abs(y - q1) + abs(y - q2))
    np.testing.assert_allclose(priorities, want, rtol=1e-4)


def test_step_updates_targets_softly_and_counts_versions():
    learner = Learner(SMALL, AgentConfig(tau=0.25))
    old_target = [p.clone() for p in learner.target1.parameters()]
    metrics, priorities = learner.step(toy_batches(1)[0])
    assert set(metrics) == set(METRIC_NAMES) and all(math.isfinite(v) for v in metrics.values())
    assert priorities.shape == (4,) and priorities.dtype == np.float32
    assert learner.weights_version == 1
    for t, o, new in zip(old_target, learner.q1.parameters(), learner.target1.parameters()):
        torch.testing.assert_close(new, 0.25 * o + 0.75 * t)


@pytest.mark.parametrize("fraction, rises", [(0.0, False), (1.0, True)])
def test_alpha_moves_toward_target_entropy(fraction, rises):
    learner = Learner(SMALL, AgentConfig(target_entropy_fraction=fraction, alpha_lr=0.01))
    start = learner.alpha
    metrics, _ = learner.step(toy_batches(1)[0])
    assert (learner.alpha > start) == rises
    assert 0 < metrics["entropy/mean"] < metrics["entropy/target_mean"] or fraction == 0.0


def test_fixed_alpha_stays():
    learner = Learner(SMALL, AgentConfig(learn_alpha=False, initial_alpha=0.2))
    learner.step(toy_batches(1)[0])
    assert learner.alpha == pytest.approx(0.2)


@pytest.mark.slow
def test_loss_falls_on_a_fixed_toy_batch():
    """100 updates on one batch of 6 transitions (discount 0.5 so the targets settle quickly)."""
    rng = np.random.default_rng(0)
    trs = [random_transition(n, rng) for n in (5, 6, 7, 8, 9, 10)]
    for t in trs:
        t.discount, t.terminal = 0.5, t.reward > 0
    batch = batch_of(trs)
    cfg = NetworkConfig(hidden=16, heads=2, action_hidden=16, head_hidden=32)
    learner = Learner(cfg, AgentConfig(lr=3e-3, tau=0.05))
    losses = [sum(learner.step(batch)[0][k] for k in ("loss/q1", "loss/q2")) for _ in range(100)]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])


def test_policy_weights_load_into_acting_networks():
    learner = Learner(SMALL)
    learner.step(toy_batches(1)[0])
    q1, q2 = policy_networks(SMALL, learner.policy_weights())
    for a, b in zip(q1.parameters(), learner.q1.parameters()):
        assert torch.equal(a, b)
    assert not q1.training and not q2.training


@pytest.mark.parametrize("source", ["online", "target"])
def test_entropy_comes_from_the_configured_networks(source):
    """Flat target networks (Q constant) give a uniform policy: entropy log|A| if and only if the
    entropy is taken from the targets."""
    learner = Learner(SMALL, AgentConfig(entropy_networks=source, target_entropy_fraction=1.0))
    with torch.no_grad():
        for t in (learner.target1, learner.target2):
            t.head3.weight.zero_()
    metrics, _ = learner.step(toy_batches(1)[0])
    uniform = metrics["entropy/mean"] == pytest.approx(metrics["entropy/target_mean"], rel=1e-5)
    assert uniform == (source == "target")


def _labelled_batch(seed=0, labelled=(True, True, False, True)):
    rng = np.random.default_rng(seed)
    trs = [random_transition(n, rng, rich=False) for n in (5, 6, 7, 6)]
    for t, on in zip(trs, labelled):
        # a learnable label: minus the move's regraft distance (basic move column 2), plus noise
        distance = observation_arrays(t.next_obs)["action_meta"][:, 2]
        t.next_labels = (
            ((-distance + rng.normal(0, 0.1, t.next_obs.n_actions)) / 10).astype(np.float32) if on else None
        )
    return batch_of(trs)


def test_demonstration_term_fits_the_labels_and_reports_itself():
    batch = _labelled_batch()
    assert batch.next_labelled.tolist() == [True, True, False, True]
    states = batch.next_actions.states.index
    for weight in (1.0, 0.0):
        learner = Learner(BASIC, AgentConfig(lr=3e-3, demo_weight=weight, demo_temperature=0.05))
        first, _ = learner.step(batch)
        assert first["demo/labelled"] == pytest.approx(0.75)
        for _ in range(60):
            last, _ = learner.step(batch)
        learner.q1.eval()
        with torch.no_grad():
            q = learner.q1(batch.next_graphs, batch.next_actions)
        corr = [
            np.corrcoef(q[states == s].numpy(), batch.next_labels[states == s].numpy())[0, 1]
            for s in (0, 1, 3)
        ]
        if weight:
            assert first["loss/demo"] > last["loss/demo"] > 0
            assert min(corr) > 0.8  # Q ranks each labelled state's moves as the labels do
        else:
            assert last["loss/demo"] == 0.0 and max(corr) < 0.5  # demo_weight 0 ignores the labels


def test_demonstration_term_changes_the_update_only_through_labelled_states():
    batch = _labelled_batch()
    a = Learner(BASIC, AgentConfig(demo_weight=1.0), seed=1)
    b = Learner(BASIC, AgentConfig(demo_weight=1.0), seed=1)
    other = _labelled_batch()
    other.next_labels = batch.next_labels.clone()
    states = batch.next_actions.states
    unlabelled = states.index == 2
    other.next_labels[unlabelled] = 123.0  # labels of the unlabelled state are ignored
    a.step(batch)
    b.step(other)
    for pa, pb in zip(a.q1.parameters(), b.q1.parameters()):
        assert torch.equal(pa, pb)


def test_without_bootstrap_the_targets_skip_the_target_networks_and_agree():
    batch = _labelled_batch()
    batch.discount = torch.zeros_like(batch.discount)
    batch.bootstraps = False  # as collate marks a batch of such transitions
    learner = Learner(BASIC, AgentConfig(demo_weight=1.0), seed=2)
    alpha = learner.log_alpha.detach().exp()
    y, entropy, target = learner._targets(batch, alpha)
    assert torch.equal(y, batch.reward)
    # full path
    tiny = dataclasses.replace(batch, discount=torch.full_like(batch.discount, 1e-30), bootstraps=True)
    y_full, entropy_full, target_full = learner._targets(tiny, alpha)
    assert torch.allclose(y_full, batch.reward) and torch.allclose(entropy_full, entropy, atol=1e-5)
    assert torch.equal(target, target_full)
    online = tuple(net(batch.next_graphs, batch.next_actions) for net in (learner.q1, learner.q2))
    _, entropy_reused, _ = learner._targets(batch, alpha, online)
    assert torch.allclose(entropy_reused, entropy, atol=1e-5)


def test_a_batch_with_a_nan_reward_never_reaches_the_weights():
    learner = Learner(SMALL, AgentConfig(), seed=3)
    good = toy_batches(1)[0]
    bad = toy_batches(1, seed=5)[0]
    bad.reward[1] = float("nan")
    before = [t.clone() for t in all_tensors(learner)]
    metrics, priorities = learner.step(bad)
    assert priorities is None and metrics["skipped"] == 1.0 and learner.skipped == 1
    assert learner.weights_version == 0 and learner.updates == 0
    after = all_tensors(learner)
    assert len(before) == len(after) and all(torch.equal(a, b) for a, b in zip(before, after))
    metrics, priorities = learner.step(good)  # and the next good batch trains as usual
    assert metrics["skipped"] == 0.0 and priorities is not None and np.isfinite(priorities).all()
    assert learner.weights_version == 1


def test_stacked_update_equals_two_network_passes():
    # the learner runs the online networks' forward and backward as one stacked pass: the same gradients (Adam
    # would blow rounding in near-zero ones up to a step of lr, so they are compared before it) and the same
    # metrics over updates
    batches = toy_batches(3, seed=4)
    runs = []
    for stacked in (True, False):
        learner = Learner(SMALL, AgentConfig(lr=1e-3, tau=0.1, target_update_period=1), seed=2)
        assert learner.online_pair is not None
        if not stacked:
            learner.online_pair = None  # two passes, one a network
        learner.compute(batches[0])
        grads = [p.grad.clone() for p in (*learner.q1.parameters(), *learner.q2.parameters())]
        learner.q_optimizer.zero_grad(set_to_none=True)
        learner.log_alpha.grad = None
        runs.append((grads, [learner.step(b)[0] for b in batches]))
    (g_stacked, m_stacked), (g_plain, m_plain) = runs
    assert all(g.abs().sum() > 0 for g in g_plain[:3])
    floor = 1e-7 * max(float(g.abs().max()) for g in g_plain)
    for a, b in zip(g_stacked, g_plain):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(b.abs().max()) + floor)
    for a, b in zip(m_stacked, m_plain):
        for name in ("loss/q1", "loss/q2", "q/mean", "target/mean", "grad_norm/q1", "grad_norm/q2"):
            assert a[name] == pytest.approx(b[name], rel=1e-4, abs=1e-6), name


def test_a_device_with_an_index_or_off_cuda_is_kept_as_named():
    # plain "cuda" becomes the current device's index (tests/gpu/test_cuda_graphs.py checks it on a GPU)
    for name in ("cpu", "cuda:1", "meta"):
        assert with_index(torch.device(name)) == torch.device(name)
    assert Learner(SMALL, AgentConfig(), "cpu").device == torch.device("cpu")
