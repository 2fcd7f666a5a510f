"""The in-process trainer: environments, an in-memory prioritised replay and the learner in one process.

It assembles the pieces the distributed system uses, without the wiring: the actor's
:class:`~phylorl.agent.collector.Collector` steps ``n_envs`` environments, :func:`select_actions`
picks their moves with the twin online networks (as the inference endpoint does, soft policy for
exploration), finished episodes become ``n``-step transitions inserted with the actor's initial
priority ``|R + γ^k V(s_{t+k}) − Q(s_t, a_t)|``, as records, and :meth:`Learner.step` updates on batches drawn
from :class:`MemoryReplay` and collated by :func:`~phylorl.records.collate.collate_records`, sending back
``|δ1| + |δ2|`` as new priorities.
Acting uses the learner's current networks (no policy lag; the services act with the last
published snapshot). The learning test's fast stand-in for the running system.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from memory_replay import MemoryReplay

from phylorl.agent.acting import select_actions
from phylorl.agent.collector import Collector
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.env.config import EnvConfig
from phylorl.env.tree_env import EnvAlignment
from phylorl.env.vec_env import VecTreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import move_to
from phylorl.records.codec import encode_transition
from phylorl.records.collate import collate_records, state_inputs


@dataclass(frozen=True)
class TrainerConfig:
    """How the in-process trainer collects experience and schedules updates."""

    n_envs: int = 8
    """Environments stepped together (one batched action selection per step)."""

    gamma: float = 0.9
    """Discount per environment step."""

    n_step: int = 1
    """Steps per transition's return (``gamma**k`` discount on the bootstrap, ``k <= n_step``)."""

    label_fraction: float = 0.0
    """Fraction of states labelled with every move's reward as demonstrations (see
    :class:`~phylorl.agent.collector.Collector`; used when ``AgentConfig.demo_weight > 0``)."""

    batch_size: int = 32
    """Transitions per learner update."""

    replay_capacity: int = 20_000
    """Most transitions held by the replay (FIFO eviction)."""

    replay_alpha: float = 0.6
    """Priority exponent of prioritised sampling (0: uniform)."""

    replay_beta: float = 0.4
    """Importance-weight exponent (0: no correction)."""

    min_replay: int = 256
    """No update before the replay holds this many transitions."""

    updates_per_step: float = 1.0
    """Learner updates per vectorised environment step (``n_envs`` transitions); may be fractional."""

    greedy_acting: bool = False
    """Act greedily (argmax of ``min(Q1, Q2)``) instead of sampling the soft policy ``softmax(Q / alpha)``."""

    device: str = "cpu"
    """Torch device of the learner and of action selection."""

    def __post_init__(self) -> None:
        for name in ("n_envs", "n_step", "batch_size", "replay_capacity"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"TrainerConfig.gamma must be in [0, 1], got {self.gamma}")
        if not 0.0 <= self.label_fraction <= 1.0:
            raise ValueError(f"TrainerConfig.label_fraction must be in [0, 1], got {self.label_fraction}")
        if self.replay_alpha < 0 or self.replay_beta < 0:
            raise ValueError("TrainerConfig.replay_alpha and replay_beta must be >= 0")
        if not 1 <= self.min_replay <= self.replay_capacity:
            raise ValueError(
                f"TrainerConfig.min_replay must be in 1..replay_capacity={self.replay_capacity}, "
                f"got {self.min_replay}"
            )
        if not (self.updates_per_step >= 0 and math.isfinite(self.updates_per_step)):
            raise ValueError(
                f"TrainerConfig.updates_per_step must be finite and >= 0, got {self.updates_per_step}"
            )


@dataclass
class TrainingHistory:
    """What :meth:`InProcessTrainer.train` saw (appended to across calls)."""

    env_steps: int = 0
    """Environment steps taken (all environments)."""
    updates: int = 0
    """Learner updates made."""
    seconds: float = 0.0
    """Wall time spent in :meth:`InProcessTrainer.train`."""
    episode_delta_loglik: list[float] = field(default_factory=list)
    """ΔlogL (final − start) of every finished episode, in order of completion."""
    episode_return: list[float] = field(default_factory=list)
    """Undiscounted sum of rewards of every finished episode."""
    metrics: list[dict[str, float]] = field(default_factory=list)
    """:meth:`Learner.step` metrics of every update."""


class InProcessTrainer:
    """Collects experience with the current networks and trains them (see module docstring).

    Args:
        alignments: the corpus, prepared (:class:`EnvAlignment`).
        env_cfg: environment settings (horizon, start trees, reward scale, radius).
        net_cfg, agent_cfg: the learner's network and update settings.
        trainer_cfg: experience collection and update schedule.
        seed: seeds the environments (``seed, seed+1, ...``), the learner, the replay and the
            exploration noise.
    """

    def __init__(
        self,
        alignments: Sequence[EnvAlignment],
        env_cfg: EnvConfig = EnvConfig(),
        net_cfg: NetworkConfig = NetworkConfig(),
        agent_cfg: AgentConfig = AgentConfig(),
        trainer_cfg: TrainerConfig = TrainerConfig(),
        seed: int = 0,
    ):
        if env_cfg.features != net_cfg.features:
            raise ValueError(
                f"the environment emits {env_cfg.features!r} observations but the network reads "
                f"{net_cfg.features!r} ones"
            )
        self.config = trainer_cfg
        self.envs = VecTreeEnv(alignments, trainer_cfg.n_envs, env_cfg, seed=seed)
        self.collector = Collector(
            self.envs, trainer_cfg.gamma, trainer_cfg.n_step, trainer_cfg.label_fraction, seed=seed
        )
        self.learner = Learner(net_cfg, agent_cfg, trainer_cfg.device, seed=seed)
        self.replay = MemoryReplay(
            trainer_cfg.replay_capacity, trainer_cfg.replay_alpha, trainer_cfg.replay_beta, seed=seed
        )
        self.history = TrainingHistory()
        self._noise = torch.Generator(device=self.learner.device).manual_seed(seed)
        self._update_credit = 0.0

    def train(
        self, steps: int, on_progress: Callable[[TrainingHistory], None] | None = None
    ) -> TrainingHistory:
        """Take ``steps`` vectorised environment steps (``steps * n_envs`` transitions), updating as
        scheduled; ``on_progress(history)`` is called after each. Returns :attr:`history`."""
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        started = time.perf_counter()
        for _ in range(steps):
            self._env_step()
            if len(self.replay) >= self.config.min_replay:
                self._update_credit += self.config.updates_per_step
                while self._update_credit >= 1.0:
                    self._update_credit -= 1.0
                    self._update()
            if on_progress is not None:
                on_progress(self.history)
        self.history.seconds += time.perf_counter() - started
        return self.history

    # ---------------------------------------------------------------------------- acting

    def _act(self, observations):
        """``(actions, q, v, version)`` for ``observations``, as the inference endpoint computes them."""
        learner = self.learner
        learner.q1.eval()
        learner.q2.eval()  # Learner.step puts them back in training mode
        graphs, actions = move_to(state_inputs(observations), learner.device)
        chosen, q, v = select_actions(
            (learner.q1, learner.q2),
            graphs,
            actions,
            learner.alpha,
            greedy=self.config.greedy_acting,
            generator=self._noise,
        )
        return (
            chosen.cpu().numpy(),
            q.cpu().numpy().astype(np.float64),
            v.cpu().numpy().astype(np.float64),
            learner.weights_version,
        )

    def _env_step(self) -> None:
        out = self.collector.step(self._act)
        self.history.env_steps += out.env_steps
        for info in out.episodes:
            self.history.episode_delta_loglik.append(float(info["episode_delta_loglik"]))
            self.history.episode_return.append(info["episode_return"])
        for start in range(0, len(out.transitions), self.replay.capacity):
            chunk = slice(start, start + self.replay.capacity)
            self.replay.insert([encode_transition(t) for t in out.transitions[chunk]], out.priorities[chunk])

    # ---------------------------------------------------------------------------- learning

    def _update(self) -> None:
        records, weights, keys = self.replay.sample(self.config.batch_size)
        batch, _ = collate_records(records, weights)
        metrics, priorities = self.learner.step(batch)
        self.replay.update_priorities(keys, priorities)
        self.history.updates += 1
        self.history.metrics.append(metrics)
