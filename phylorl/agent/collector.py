"""Experience collection, shared by the actor service and the in-process run.

:class:`Collector` steps ``K`` environments with one batched action choice per step (``act``: the inference
endpoint in an actor, the learner's own networks in-process) and turns finished episodes into ``n``-step
transitions with the initial priority ``|R + γ^k V(s_{t+k}) − Q(s_t, a_t)|``. ``V(s)`` comes from the call
that acts on ``s``; a truncated episode's last state is never acted on, so it rides along in the next call as
an extra observation whose chosen move is ignored. Transitions keep the weights version that chose their
action.

Demonstrations: with ``label_fraction > 0`` each state acted on is, with that probability, labelled with the
environment's reward of every one of its moves (:meth:`TreeEnv.move_rewards`: the costly part, done where the
tree is). The labels ride on the transition whose *next* state that is (``Transition.next_labels``), since a
batch carries all moves of its next states (``AgentConfig.demo_weight``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from phylorl.agent.nstep import n_step_transitions
from phylorl.interfaces import Act
from phylorl.types import Observation, Transition


@dataclass
class _Episode:
    steps: list[Transition] = field(default_factory=list)
    q: list[float] = field(default_factory=list)
    v: list[float] = field(default_factory=list)
    labels: list = field(default_factory=list)  # labels of steps[t].obs, or None


@dataclass
class Collected:
    """What one :meth:`Collector.step` produced."""

    transitions: list[Transition]
    """``n``-step transitions of the episodes completed (their last value known) in this call."""
    priorities: np.ndarray
    """Initial priority of each transition."""
    episodes: list[dict]
    """Step info of every episode that ended in this step (``episode_delta_loglik``, ``episode_return``, ...).
    """
    env_steps: int
    """Environment steps taken (one per environment)."""
    step_seconds: float
    """Wall time of stepping the environments."""
    weights_version: int
    """Version of the weights that chose this step's moves."""


class Collector:
    """Steps ``envs`` with ``act`` and emits ``n_step`` transitions (see module docstring)."""

    def __init__(self, envs, gamma: float, n_step: int = 1, label_fraction: float = 0.0, seed: int = 0):
        if not 0.0 <= gamma <= 1.0 or n_step < 1 or not 0.0 <= label_fraction <= 1.0:
            raise ValueError(
                f"need 0 <= gamma <= 1, n_step >= 1 and 0 <= label_fraction <= 1, "
                f"got {gamma}, {n_step}, {label_fraction}"
            )
        self.envs = envs
        self.gamma = gamma
        self.n_step = n_step
        self.label_fraction = label_fraction
        self.labelled_states = 0
        self.label_seconds = 0.0
        self._rng = np.random.default_rng([seed, 0x1ABE1])
        self.obs: list[Observation] | None = None
        self.reset_seconds = 0.0
        self._open = [_Episode() for _ in range(len(envs))]
        self._waiting: list[_Episode] = []  # truncated episodes waiting for V(s_T)
        self._asked: list[_Episode] | None = None  # those of the request in flight

    def step(self, act: Act) -> Collected | None:
        """One batched action choice and one step of every environment; ``None`` when ``act`` stops."""
        answer = act(self.request())
        if answer is None:
            self.cancel()
            return None
        return self.finish(answer)

    def request(self) -> list[Observation]:
        """The states the next :meth:`finish` needs an answer for: the ``K`` current ones (resetting the
        environments on first use), then the last state of each truncated episode waiting for its value. Split
        from :meth:`finish` so that an actor can step other environments meanwhile."""
        if self.obs is None:
            started = time.perf_counter()
            self.obs = list(self.envs.reset())
            self.reset_seconds = (time.perf_counter() - started) / len(self.obs)
        if self._asked is None:
            self._asked, self._waiting = self._waiting, []
        return self.obs + [episode.steps[-1].next_obs for episode in self._asked]

    def cancel(self) -> None:
        """Forget the last :meth:`request` (no answer will come); its waiting episodes wait on."""
        if self._asked is not None:
            self._waiting, self._asked = self._asked + self._waiting, None

    def finish(self, answer) -> Collected:
        """Step every environment with ``answer`` (``act``'s ``(actions, q, v, version)``) to the last
        :meth:`request`."""
        if self._asked is None:
            raise RuntimeError("Collector.finish without a request")
        waiting, self._asked = self._asked, None
        k = len(self.obs)
        actions, q, v, version = answer
        labels = self._labels(k)
        transitions: list[Transition] = []
        priorities: list[float] = []
        for j, episode in enumerate(waiting):
            self._emit(episode, float(v[k + j]), transitions, priorities)
        started = time.perf_counter()
        result = self.envs.step(np.asarray(actions[:k], dtype=np.int64))
        seconds = time.perf_counter() - started
        ended = []
        for i in range(k):
            episode = self._open[i]
            episode.steps.append(
                Transition(
                    self.obs[i],
                    int(actions[i]),
                    float(result.rewards[i]),
                    result.next_obs[i],
                    bool(result.terminal[i]),
                    bool(result.truncated[i]),
                    self.gamma,
                    policy_version=int(version),
                )
            )
            episode.q.append(float(q[i]))
            episode.v.append(float(v[i]))
            episode.labels.append(labels[i])
            if result.terminal[i] or result.truncated[i]:
                ended.append(
                    {**result.infos[i], "episode_return": float(sum(t.reward for t in episode.steps))}
                )
                if result.terminal[i]:
                    self._emit(episode, 0.0, transitions, priorities)
                else:
                    self._waiting.append(episode)
                self._open[i] = _Episode()
        self.obs = list(result.obs)
        return Collected(
            transitions, np.asarray(priorities, dtype=np.float64), ended, k, seconds, int(version)
        )

    def _labels(self, k: int) -> list:
        """Labels of the ``k`` current states (``None`` for those not drawn for labelling)."""
        out = [None] * k
        if self.label_fraction <= 0.0:
            return out
        started = time.perf_counter()
        for i in range(k):
            if self._rng.random() < self.label_fraction:
                out[i] = self.envs.envs[i].move_rewards()
                self.labelled_states += 1
        self.label_seconds += time.perf_counter() - started
        return out

    def _emit(
        self, episode: _Episode, final_value: float, out: list[Transition], priorities: list[float]
    ) -> None:
        steps, n = episode.steps, self.n_step
        values = episode.v + [final_value]
        for t, transition in enumerate(n_step_transitions(steps, n)):
            end = min(t + n, len(steps))
            next_v = 0.0 if transition.terminal else values[end]
            priorities.append(abs(transition.reward + transition.discount * next_v - episode.q[t]))
            out.append(
                dataclasses.replace(
                    transition,
                    policy_version=steps[t].policy_version,
                    next_labels=episode.labels[end] if end < len(steps) else None,
                )
            )
