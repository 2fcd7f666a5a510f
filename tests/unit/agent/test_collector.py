"""The Collector (the actor's and the in-process run's experience loop) on real environments."""

import numpy as np
import pytest

from phylorl.agent.collector import Collector
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment
from phylorl.env.vec_env import VecTreeEnv
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset


@pytest.fixture(scope="module")
def entry():
    data = simulate_dataset(7, 200, dataset_rng(9, 0), model=parse_model("JC"))
    return EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")


class ScriptedAct:
    """Move 0 for every state; Q = 0.1 × call number, V = the observation's number of moves / 100."""

    def __init__(self):
        self.calls = []

    def __call__(self, observations):
        self.calls.append(list(observations))
        n = len(observations)
        v = np.array([o.n_actions / 100.0 for o in observations])
        return np.zeros(n, np.int64), np.full(n, 0.1 * len(self.calls)), v, len(self.calls)


@pytest.mark.parametrize("n_step", [1, 3])
def test_truncated_episodes_become_n_step_transitions_with_bootstrap_priorities(entry, n_step):
    horizon, k, gamma = 4, 2, 0.9
    envs = VecTreeEnv([entry], k, EnvConfig(horizon=horizon, features="basic"), seed=0)
    collector = Collector(envs, gamma, n_step)
    act = ScriptedAct()
    outs = [collector.step(act) for _ in range(horizon + 1)]
    # nothing is emitted before an episode's last value is known: the call after the last step
    assert all(not o.transitions for o in outs[:horizon])
    assert [len(o.episodes) for o in outs] == [0, 0, 0, k, 0]
    last = outs[horizon]
    assert len(last.transitions) == k * horizon and last.priorities.shape == (k * horizon,)
    # the truncated episodes' last states rode along as extra observations in that call
    assert len(act.calls[horizon]) == 2 * k
    for env_index in range(k):
        steps = last.transitions[env_index * horizon : (env_index + 1) * horizon]
        priorities = last.priorities[env_index * horizon : (env_index + 1) * horizon]
        for t, (transition, priority) in enumerate(zip(steps, priorities)):
            span = min(n_step, horizon - t)
            assert transition.discount == pytest.approx(gamma**span)
            assert transition.policy_version == t + 1  # the weights version of the call that chose it
            end = t + span
            if end < horizon:
                next_v = act.calls[end][env_index].n_actions / 100.0
            else:
                next_v = act.calls[horizon][k + env_index].n_actions / 100.0
            q = 0.1 * (t + 1)
            assert priority == pytest.approx(abs(transition.reward + transition.discount * next_v - q))
            assert transition.truncated == (end == horizon) and not transition.terminal


def test_stopping_act_returns_none_and_keeps_waiting_episodes(entry):
    envs = VecTreeEnv([entry], 1, EnvConfig(horizon=1, features="basic"), seed=1)
    collector = Collector(envs, 0.5)
    assert collector.step(ScriptedAct()).episodes  # one-step episode ended, its value still unknown
    assert collector.step(lambda obs: None) is None
    out = collector.step(ScriptedAct())
    assert len(out.transitions) == 1


class RandomAct:
    """A seeded uniformly random move for every state (Q = V = 0)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, observations):
        n = len(observations)
        return np.array([self.rng.integers(o.n_actions) for o in observations]), np.zeros(n), np.zeros(n), 1


def test_labelled_states_carry_every_moves_reward_on_the_transition_that_reaches_them(entry):
    horizon, k = 5, 2
    envs = VecTreeEnv([entry], k, EnvConfig(horizon=horizon, features="rich"), seed=3)
    collector = Collector(envs, 0.9, n_step=1, label_fraction=1.0, seed=3)
    act = RandomAct(3)
    transitions = []
    for _ in range(horizon + 1):
        transitions += collector.step(act).transitions
    # + the new starts
    assert len(transitions) == k * horizon and collector.labelled_states == k * (horizon + 1)
    for env_index in range(k):
        episode = transitions[env_index * horizon : (env_index + 1) * horizon]
        for t, transition in enumerate(episode):
            if t == horizon - 1:  # the last state is never acted on, so never labelled
                assert transition.next_labels is None
                continue
            labels = transition.next_labels
            assert labels.dtype == np.float32 and labels.shape == (transition.next_obs.n_actions,)
            # the label of the move then taken is the reward the environment paid for it
            following = episode[t + 1]
            assert following.obs is transition.next_obs
            assert labels[following.action] == pytest.approx(following.reward, abs=1e-4)
            assert np.all(np.isfinite(labels)) and labels.std() > 0


def test_without_label_fraction_nothing_is_labelled(entry):
    envs = VecTreeEnv([entry], 1, EnvConfig(horizon=2, features="basic"), seed=0)
    collector = Collector(envs, 0.9)
    transitions = [t for _ in range(3) for t in collector.step(RandomAct(0)).transitions]
    assert transitions and all(t.next_labels is None for t in transitions) and collector.labelled_states == 0


def test_request_then_finish_is_step_and_a_cancelled_request_keeps_its_waiting_episodes(entry):
    """The split an actor pipelines with: ``request`` (repeatable until answered), ``finish``; ``cancel``
    drops an unanswered request, and the truncated episodes it asked a value for are asked again next time."""
    config = EnvConfig(horizon=2, features="basic")
    stepped = Collector(VecTreeEnv([entry], 2, config, seed=4), 0.9)
    split = Collector(VecTreeEnv([entry], 2, config, seed=4), 0.9)
    act_a, act_b = ScriptedAct(), ScriptedAct()
    with pytest.raises(RuntimeError, match="without a request"):
        split.finish(act_b([]))
    act_b.calls.clear()
    for call in range(5):
        a = stepped.step(act_a)
        asked = split.request()
        assert split.request() == asked  # asking again before the answer changes nothing
        if call == 2:  # the call that carries the two truncated episodes' last states
            assert len(asked) == 4
            split.cancel()
            assert split.request() == asked
        b = split.finish(act_b(asked))
        assert [(t.action, t.reward, t.discount) for t in a.transitions] == [
            (t.action, t.reward, t.discount) for t in b.transitions
        ]
        assert np.array_equal(a.priorities, b.priorities) and len(a.episodes) == len(b.episodes)
    assert [len(c) for c in act_a.calls] == [len(c) for c in act_b.calls] == [2, 2, 4, 2, 4]
