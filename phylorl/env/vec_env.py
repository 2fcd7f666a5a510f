"""VecTreeEnv: K tree environments stepped together by one actor."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phylorl.types import Observation

from .config import EnvConfig
from .tree_env import EnvAlignment, TreeEnv


@dataclass
class VecStep:
    """Result of stepping every environment once.

    ``next_obs[i]`` is the state reached by environment ``i``'s move (what a transition stores);
    ``obs[i]`` is the state to act on next: the same, or the first state of a new episode when
    environment ``i``'s episode ended (``terminal[i] or truncated[i]``); ``infos[i]`` then also
    holds ``episode_delta_loglik``, ``episode_final_loglik`` and ``reset_seconds``.
    """

    next_obs: list[Observation]
    rewards: np.ndarray
    terminal: np.ndarray
    truncated: np.ndarray
    infos: list[dict]
    obs: list[Observation]


class VecTreeEnv:
    """``n_envs`` :class:`TreeEnv` over the same alignments, seeded ``seed, seed+1, ...``; auto-resets."""

    def __init__(
        self, alignments: Sequence[EnvAlignment], n_envs: int, config: EnvConfig = EnvConfig(), seed: int = 0
    ):
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        self.envs = [TreeEnv(alignments, config, seed=seed + i) for i in range(n_envs)]

    def split(self, parts: int) -> list[VecTreeEnv]:
        """These environments in ``parts`` groups of near-equal size (in order; the groups share them)."""
        if not 1 <= parts <= len(self.envs):
            raise ValueError(f"cannot split {len(self.envs)} environments into {parts} groups")
        bounds = [round(i * len(self.envs) / parts) for i in range(parts + 1)]
        groups = [VecTreeEnv.__new__(VecTreeEnv) for _ in range(parts)]
        for group, a, b in zip(groups, bounds, bounds[1:]):
            group.envs = self.envs[a:b]
        return groups

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self) -> list[Observation]:
        return [env.reset()[0] for env in self.envs]

    def step(self, actions) -> VecStep:
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (len(self.envs),):
            raise ValueError(f"expected {len(self.envs)} actions, got shape {actions.shape}")
        next_obs, obs, infos = [], [], []
        rewards = np.zeros(len(self.envs), dtype=np.float64)
        terminal = np.zeros(len(self.envs), dtype=bool)
        truncated = np.zeros(len(self.envs), dtype=bool)
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            o, r, term, trunc, info = env.step(int(action))
            next_obs.append(o)
            rewards[i], terminal[i], truncated[i] = r, term, trunc
            if term or trunc:
                info["episode_delta_loglik"] = env.loglik - env.start_loglik
                info["episode_final_loglik"] = env.loglik
                started = time.perf_counter()
                o, _ = env.reset()
                info["reset_seconds"] = time.perf_counter() - started
            obs.append(o)
            infos.append(info)
        return VecStep(next_obs, rewards, terminal, truncated, infos, obs)
