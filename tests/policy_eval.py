"""Policies judged from the same seeded start trees, for tests of what training teaches: episodes of a
policy on one alignment, and an :class:`~phylorl.agent.policy.AgentPolicy` from a learner in hand."""

from __future__ import annotations

import numpy as np

from phylorl.agent.acting import policy_networks
from phylorl.agent.learner import Learner
from phylorl.agent.policy import DEFAULT_TABU, AgentPolicy
from phylorl.env.config import EnvConfig
from phylorl.env.search import Policy, SearchResult, run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv


def policy_from_learner(learner: Learner, tabu: int = DEFAULT_TABU) -> AgentPolicy:
    """A policy from a copy of ``learner``'s current online networks."""
    nets = policy_networks(learner.net_cfg, learner.policy_weights(), learner.device)
    return AgentPolicy(nets, learner.alpha, tabu)


def evaluate_episodes(
    policy: str | Policy,
    entry: EnvAlignment,
    episodes: int,
    steps: int,
    seed: int = 0,
    env_cfg: EnvConfig | None = None,
) -> list[SearchResult]:
    """Run ``policy`` (``"random"``, ``"greedy"``, stopping at a local optimum, or a :class:`Policy`) for
    ``steps`` moves from ``episodes`` start trees of ``entry``: episode ``e`` starts in ``TreeEnv([entry],
    env_cfg, seed=seed + e)``, the same for every policy, and the random policy draws from
    ``default_rng([seed, e])``. ``env_cfg`` defaults to random start trees; its horizon is ignored."""
    if episodes < 1 or steps < 1:
        raise ValueError(f"episodes and steps must be >= 1, got episodes={episodes}, steps={steps}")
    env_cfg = env_cfg if env_cfg is not None else EnvConfig(start="random")
    results = []
    for episode in range(episodes):
        env = TreeEnv([entry], env_cfg, seed=seed + episode)
        env.reset(0)
        results.append(run_search(env, policy, steps=steps, rng=np.random.default_rng([seed, episode])))
    return results


def evaluate_policy(*args, **kwargs) -> list[float]:
    """ΔlogL (final − start) of each episode of :func:`evaluate_episodes` (the same arguments)."""
    return [r.final_loglik - r.start_loglik for r in evaluate_episodes(*args, **kwargs)]
