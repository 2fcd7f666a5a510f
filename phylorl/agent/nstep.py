"""n-step returns: one-step transitions of an episode -> n-step transitions (pure function)."""

from __future__ import annotations

from collections.abc import Sequence

from phylorl.types import Transition


def n_step_transitions(episode: Sequence[Transition], n: int) -> list[Transition]:
    r"""The ``n``-step transition starting at every step of ``episode``.

    ``episode`` holds consecutive one-step transitions of one episode; only the last may be terminal or
    truncated. The transition from step ``t`` spans ``k = min(n, T - t)`` steps:

    .. math::
        R = \sum_{i<k} \Big(\prod_{j<i} d_{t+j}\Big) r_{t+i}, \qquad
        \mathrm{discount} = \prod_{j<k} d_{t+j},

    with ``d`` each step's own ``discount``. ``next_obs``, ``terminal`` and ``truncated`` are those of the
    last step spanned (a window ending on a truncated step still bootstraps)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for i, step in enumerate(episode[:-1]):
        if step.terminal or step.truncated:
            raise ValueError(f"step {i} of {len(episode)} ends the episode; only the last step may")
    out = []
    for t in range(len(episode)):
        reward, discount = 0.0, 1.0
        window = episode[t : t + n]
        for step in window:
            reward += discount * step.reward
            discount *= step.discount
        last = window[-1]
        first = episode[t]
        out.append(
            Transition(
                first.obs, first.action, reward, last.next_obs, last.terminal, last.truncated, discount
            )
        )
    return out
