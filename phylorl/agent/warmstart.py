"""Supervised warm start: teach the Q networks the environment's own one-step reward of every move.

A soft-Q agent acts greedily on ``Q(s, a) = r(s, a) + γ V(s')``, whose first term the environment can compute
for every move of a state (:meth:`TreeEnv.evaluate_moves`). Before reinforcement learning the networks are
fitted to these labels on states that searches visit:

* :func:`label_episode` runs one episode from a random start tree, labelling every move of each state, and
  moves with probability ``explore`` at random, otherwise by the best label (likelihood-greedy) or, given a
  network, by its greedy move (DAgger).
* :func:`fit` minimises, per state, both networks' squared error on every move's label plus a listwise
  cross-entropy between ``softmax(Q / T)`` and ``softmax(label / T)`` (``T`` = ``temperature``, in reward
  units), which gets the top of the ranking right.

Nothing here does I/O: collecting in parallel and saving belong to the caller (``phylorl warmstart``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from phylorl.agent.losses import demonstration_loss
from phylorl.env.config import EnvConfig
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.inputs import move_to
from phylorl.records.collate import state_inputs
from phylorl.types import Observation


@dataclass(frozen=True)
class WarmStartConfig:
    """How labelled states are collected and fitted."""

    steps_factor: float = 2.0
    """Steps per episode: this many times the alignment's number of taxa."""
    explore: float = 0.25
    """Probability of a uniformly random move (otherwise the greedy move of the behaviour)."""
    epochs: int = 8
    """Passes over the labelled states."""
    batch_states: int = 16
    """States per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    temperature: float = 0.02
    """Softmax temperature of the listwise loss, in reward units (0.02 ≈ 1 log-likelihood unit at
    log-likelihood −5000 and reward scale 100)."""
    rank_weight: float = 1.0
    """Weight of the listwise cross-entropy against the squared error."""

    def __post_init__(self) -> None:
        if not self.steps_factor > 0 or not 0.0 <= self.explore <= 1.0:
            raise ValueError("steps_factor must be > 0 and explore in [0, 1]")
        if self.epochs < 1 or self.batch_states < 1 or not self.lr > 0 or not self.temperature > 0:
            raise ValueError("epochs and batch_states must be >= 1; lr and temperature > 0")


@dataclass
class LabelledState:
    """One state with the reward of each of its moves (same order as ``obs.moves``)."""

    obs: Observation
    rewards: np.ndarray
    n_taxa: int


def label_episode(
    entry: EnvAlignment,
    env_cfg: EnvConfig,
    cfg: WarmStartConfig,
    seed: int,
    policy=None,
    deadline: float | None = None,
) -> list[LabelledState]:
    """Labelled states of one episode from a random start (see module docstring), ended early once
    ``time.time()`` passes ``deadline``."""
    env = TreeEnv([entry], env_cfg, seed=seed)
    obs, _ = env.reset(0)
    rng = np.random.default_rng([seed, 7])
    n = entry.alignment.n_taxa
    out = []
    for _ in range(max(1, int(round(cfg.steps_factor * n)))):
        if not len(env.moves) or (deadline is not None and time.time() > deadline):
            break
        rewards = env.move_rewards()
        out.append(LabelledState(obs, rewards, n))
        if rng.random() < cfg.explore:
            action = int(rng.integers(len(rewards)))
        elif policy is not None:
            action = policy.choose(env)
        else:
            action = int(np.argmax(rewards))
        obs = env.step(action)[0]
    return out


def fit(
    learner, states: list[LabelledState], cfg: WarmStartConfig, seed: int = 0, on_epoch=None
) -> list[dict]:
    """Fit ``learner``'s two online networks to ``states`` (targets copied from them at the end)."""
    if not states:
        raise ValueError("no labelled states to fit")
    if states[0].obs.features != learner.net_cfg.features:
        raise ValueError(
            f"the states have the {states[0].obs.features} features, the network reads the "
            f"{learner.net_cfg.features} ones"
        )
    device = learner.device
    params = [*learner.q1.parameters(), *learner.q2.parameters()]
    optimizer = torch.optim.Adam(params, lr=cfg.lr)
    steps_total = cfg.epochs * math.ceil(len(states) / cfg.batch_states)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(1, steps_total))
    rng = np.random.default_rng(seed)
    history = []
    learner.q1.train()
    learner.q2.train()
    for epoch in range(cfg.epochs):
        order = rng.permutation(len(states))
        sums = np.zeros(3)
        batches = 0
        for start in range(0, len(order), cfg.batch_states):
            chunk = [states[i] for i in order[start : start + cfg.batch_states]]
            graphs, actions = move_to(state_inputs([s.obs for s in chunk]), device)
            labels = torch.from_numpy(np.concatenate([s.rewards for s in chunk])).to(device)
            everything = torch.ones(len(chunk), dtype=torch.bool, device=device)
            total = 0.0
            parts = np.zeros(2)
            for net in (learner.q1, learner.q2):
                loss, mse, ce = demonstration_loss(
                    net(graphs, actions), labels, actions.states, everything, cfg.temperature, cfg.rank_weight
                )
                total = total + loss
                parts += (float(mse.detach()), float(ce.detach()))
            optimizer.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(params, 10.0)
            optimizer.step()
            schedule.step()
            sums += (float(total.detach()) / 2, *(parts / 2))
            batches += 1
        record = {"epoch": epoch + 1, **dict(zip(("loss", "mse", "ce"), sums / batches))}
        history.append(record)
        if on_epoch is not None:
            on_epoch(record)
    learner.target1.load_state_dict(learner.q1.state_dict())
    learner.target2.load_state_dict(learner.q2.state_dict())
    learner.q1.eval()
    learner.q2.eval()
    return history


@torch.no_grad()
def top1_agreement(learner, states: list[LabelledState]) -> float:
    """Fraction of states whose greedy move by ``min(Q1, Q2)`` is the best move by label."""
    hits = 0
    learner.q1.eval()
    learner.q2.eval()
    for s in states:
        graphs, actions = move_to(state_inputs([s.obs]), learner.device)
        q = torch.minimum(learner.q1(graphs, actions), learner.q2(graphs, actions))
        hits += int(int(q.argmax()) == int(np.argmax(s.rewards)))
    return hits / max(1, len(states))
