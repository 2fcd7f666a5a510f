import pytest

from phylorl.agent.nstep import n_step_transitions
from phylorl.types import Transition


def episode(rewards, gamma, terminal=False, truncated=False):
    """Observations are stand-in labels 's0', 's1', ...: n-step only passes them through."""
    T = len(rewards)
    return [
        Transition(
            obs=f"s{t}",
            action=t,
            reward=r,
            next_obs=f"s{t + 1}",
            terminal=terminal and t == T - 1,
            truncated=truncated and t == T - 1,
            discount=gamma,
        )
        for t, r in enumerate(rewards)
    ]


def test_two_step_returns_by_hand_with_truncated_end():
    out = n_step_transitions(episode([1.0, 2.0, 3.0], 0.5, truncated=True), n=2)
    got = [(o.obs, o.action, o.reward, o.next_obs, o.discount, o.terminal, o.truncated) for o in out]
    assert got == [
        ("s0", 0, pytest.approx(1 + 0.5 * 2), "s2", 0.25, False, False),
        ("s1", 1, pytest.approx(2 + 0.5 * 3), "s3", 0.25, False, True),  # bootstraps from s3
        ("s2", 2, pytest.approx(3.0), "s3", 0.5, False, True),
    ]


def test_three_step_returns_with_terminal_end():
    out = n_step_transitions(episode([1.0, 1.0, 1.0, 4.0], 0.9, terminal=True), n=3)
    assert [o.reward for o in out] == pytest.approx([1 + 0.9 + 0.81, 1 + 0.9 + 0.81 * 4, 1 + 0.9 * 4, 4.0])
    assert [o.discount for o in out] == pytest.approx([0.729, 0.729, 0.81, 0.9])
    assert [o.terminal for o in out] == [False, True, True, True]
    assert [o.next_obs for o in out] == ["s3", "s4", "s4", "s4"]


def test_one_step_is_identity():
    ep = episode([1.0, -2.0], 0.99, terminal=True)
    out = n_step_transitions(ep, n=1)
    assert [(o.reward, o.discount, o.terminal) for o in out] == [(1.0, 0.99, False), (-2.0, 0.99, True)]


def test_episode_end_in_the_middle_raises():
    ep = episode([1.0, 2.0], 0.9)
    ep[0].truncated = True
    with pytest.raises(ValueError, match="only the last step"):
        n_step_transitions(ep, n=2)
    with pytest.raises(ValueError, match="n must be"):
        n_step_transitions(ep, n=0)
