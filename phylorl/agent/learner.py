"""The learner core: twin soft-Q update, temperature update, target update, checkpoints.

``Learner.step(batch)`` runs one update and returns ``(metrics, priorities)``; its only I/O is
:meth:`Learner.save` / :meth:`Learner.restore` (one checkpoint file, loadable with ``weights_only=True``).

Two counters, both saved: ``updates`` counts updates done (what ``--updates`` limits; checkpoint key
``"steps"``); ``weights_version`` labels the online networks: +1 per :meth:`step`, and a restarted learner may
move it past a version published before its last checkpoint (versions never go back), so it can exceed
``updates``. Anything cached from network outputs must be keyed by the version.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import tempfile
from contextlib import contextmanager, nullcontext

import numpy as np
import torch
from torch import nn
from torch.autograd.graph import increment_version

from phylorl.agent.acting import pair_tensors
from phylorl.agent.capture import CudaGraphs
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner_setup import keep_options, with_index
from phylorl.agent.losses import (
    alpha_loss,
    clip_grad_norm,
    critic_loss,
    demonstration_loss,
    policy_entropy,
    soft_update,
    soft_value,
    target_entropy,
    td_target,
)
from phylorl.agent.transfer import on_device, split, to_host
from phylorl.nets import fused_head
from phylorl.nets.compact_actions import CompactActions
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import Batch
from phylorl.nets.qnet import QNetwork
from phylorl.nets.twin import TwinQ

CHECKPOINT_FORMAT = 1
ADAM_EPS = 1e-8
"""Adam's epsilon (the Q networks' optimiser and alpha's)."""
CPU_ACTION_CHUNK = 4096
"""On a CPU the no-grad passes over the next states' moves run this many moves at a time (the same values)."""

METRIC_NAMES = (
    "loss/q1",
    "loss/q2",
    "loss/alpha",
    "alpha",
    "q/mean",
    "target/mean",
    "td/abs_mean",
    "entropy/mean",
    "entropy/target_mean",
    "grad_norm/q1",
    "grad_norm/q2",
    "loss/demo",
    "demo/labelled",
    "skipped",
)
"""Keys of :meth:`Learner.step`'s metrics: losses, ``alpha`` (before its update), mean ``Q(s,a)`` of
``q1``, mean TD target, mean ``(|td1|+|td2|)/2``, the online policy's mean entropy on ``s'`` (nats) and
its target, each Q network's gradient norm before clipping, the demonstration loss (summed over both
networks, before ``demo_weight``; 0 without labels), the fraction of the batch's next states labelled, and
``skipped``: 1 when the batch was skipped because its loss or a gradient was not finite (0 otherwise)."""


@contextmanager
def _eval_mode(*nets: nn.Module):
    modes = [n.training for n in nets]
    for n in nets:
        n.eval()
    try:
        yield
    finally:
        for n, mode in zip(nets, modes):
            n.train(mode)


class Learner:
    """Two online Q networks, their targets, ``log alpha`` and the optimisers, on one device. ``seed`` fixes
    the initial parameters (drawn without touching the global RNG) and the learner's own dropout RNG."""

    def __init__(
        self,
        net_cfg: NetworkConfig = NetworkConfig(),
        agent_cfg: AgentConfig = AgentConfig(),
        device: torch.device | str = "cpu",
        seed: int = 0,
    ):
        self.net_cfg = net_cfg
        self.agent_cfg = agent_cfg
        self.device = with_index(torch.device(device))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.q1 = QNetwork(net_cfg).to(self.device)
            self.q2 = QNetwork(net_cfg).to(self.device)
        self.target1 = copy.deepcopy(self.q1).requires_grad_(False).eval()
        self.target2 = copy.deepcopy(self.q2).requires_grad_(False).eval()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(agent_cfg.initial_alpha), device=self.device))
        graphs = agent_cfg.cuda_graphs and self.device.type == "cuda"
        self._options = (
            {"fused": self.device.type == "cuda", "capturable": graphs},
            {"fused": False, "capturable": graphs},
        )
        """The optimisers' ``fused`` and ``capturable`` (kept when a checkpoint's state is loaded)."""
        self.q_optimizer = torch.optim.Adam(
            [*self.q1.parameters(), *self.q2.parameters()], lr=agent_cfg.lr, eps=ADAM_EPS, **self._options[0]
        )
        self.alpha_optimizer = torch.optim.Adam(
            [self.log_alpha], lr=agent_cfg.alpha_lr, eps=ADAM_EPS, **self._options[1]
        )
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)
        self.updates = 0
        self.weights_version = 0
        self.skipped = 0
        """Batches skipped because their loss or gradients were not finite (not saved with checkpoints)."""
        self.twins: tuple[TwinQ, TwinQ] | None = None
        """``(targets, online)`` pairs for the no-grad passes over the next moves when
        ``AgentConfig.fused_head`` applies (a CUDA device), else ``None``."""
        if agent_cfg.fused_head and self.device.type == "cuda":
            fused_head.require()
            self.twins = (
                TwinQ(self.target1, self.target2, fused=True, cache=not graphs),
                TwinQ(self.q1, self.q2, fused=True, cache=not graphs),
            )
        self.online_pair = (
            TwinQ(self.q1, self.q2, cache=False) if net_cfg.action_features == "gather" else None
        )
        """The online networks as one stacked pair for an update's forward and backward
        (:meth:`~phylorl.nets.twin.TwinQ.values`, where it applies), else ``None``."""
        self.graphs: CudaGraphs | None = CudaGraphs(self) if graphs else None
        """The captured updates (``AgentConfig.cuda_graphs`` on a CUDA device), else ``None``."""

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def policy_alpha(self) -> torch.Tensor:
        """The temperature as a new 0-d tensor on the learner's device (:attr:`alpha` would wait for the GPU):
        what a publication hands the inference endpoint with :meth:`policy_tensors`."""
        return self.log_alpha.detach().exp()

    def step(self, batch: Batch) -> tuple[dict[str, float], np.ndarray | None]:
        """One update on ``batch``; returns ``(metrics, priorities)``.

        ``metrics``: see :data:`METRIC_NAMES`. ``priorities``: float32 ``[B]``, ``|td1| + |td2|`` of
        this update (before the parameters change), for the replay service.

        A batch whose loss or gradient norm is NaN or infinite (a NaN reward, say) never reaches the
        weights: nothing is updated (networks, optimiser state, alpha, targets, version), the metrics
        are NaN but ``skipped`` = 1, and ``priorities`` is ``None``.
        """
        if batch.reward.device != self.device or isinstance(batch.next_actions, CompactActions):
            batch = on_device(batch, self.device)
        captured = self.graphs.prepare(batch) if self.graphs is not None else None  # None: eager
        with self.graphs.eager() if self.graphs is not None and captured is None else nullcontext():
            if captured is not None:
                values, priorities = captured.compute(batch)
            else:
                self.q_optimizer.zero_grad(set_to_none=True)
                self.log_alpha.grad = None
                values, priorities = self.compute(batch)
            # the update's one device sync, for the metrics and priorities (from before its step, whose
            # kernels run on while the caller goes on)
            host, priorities = split(to_host(values, priorities), values.shape[0])
            if not host[-1]:
                if captured is None:  # (a captured update's gradients live in its graph and are reassigned)
                    self.q_optimizer.zero_grad(set_to_none=True)
                self.skipped += 1
                return {**{name: math.nan for name in METRIC_NAMES}, "skipped": 1.0}, None
            if captured is not None:
                captured.apply()
            else:
                self.apply()
            self.updates += 1
            self.weights_version += 1
            if self.updates % self.agent_cfg.target_update_period == 0 and not (
                captured and captured.updates_targets
            ):
                self.update_targets()
        return dict(zip(METRIC_NAMES, host[:-1])), priorities

    def compute(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward of one update, no parameter changed: the Q networks' gradients (clipped) and
        ``log alpha``'s are *assigned* (call with them ``None``, as CUDA graph capture needs). Returns device
        tensors ``(values, priorities)``: ``values`` holds :data:`METRIC_NAMES`'s values then 1 if the loss,
        both gradient norms and alpha's loss are finite (else 0); ``priorities`` ``[B]``. No host sync."""
        cfg = self.agent_cfg
        alpha = self.log_alpha.detach().exp()
        self.q1.train()
        self.q2.train()
        q_next = None  # the online networks' Q on every next move, when the demonstrations need it
        if cfg.demo_weight > 0 and batch.any_labelled:
            q_next = tuple(net(batch.next_graphs, batch.next_actions, self.rng) for net in (self.q1, self.q2))
        y, entropy, entropy_target = self._targets(batch, alpha, q_next)

        if self.online_pair is not None and self.online_pair.applies_with_grad(batch.graphs, batch.actions):
            q1, q2 = self.online_pair.values(batch.graphs, batch.actions).unbind(0)
        else:
            q1 = self.q1(batch.graphs, batch.actions, self.rng)
            q2 = self.q2(batch.graphs, batch.actions, self.rng)
        loss, extra = critic_loss(q1, q2, y, batch.weights)
        zero = torch.zeros((), device=self.device)
        demo = zero
        if q_next is not None:
            labels = (batch.next_labels, batch.next_actions.states, batch.next_labelled)
            demo = sum(
                demonstration_loss(q, *labels, cfg.demo_temperature, cfg.demo_rank_weight)[0] for q in q_next
            )
            loss = loss + cfg.demo_weight * demo
        loss.backward()
        norm1 = clip_grad_norm(self.q1, cfg.max_grad_norm)
        norm2 = clip_grad_norm(self.q2, cfg.max_grad_norm)
        a_loss = alpha_loss(self.log_alpha, entropy, entropy_target)
        a_loss.backward()  # reaches log alpha alone (the entropies are detached)
        finite = torch.isfinite(torch.stack([loss.detach(), norm1, norm2, a_loss.detach()])).all()
        values = torch.stack(
            [
                extra["loss1"],
                extra["loss2"],
                a_loss.detach(),
                alpha,
                q1.detach().mean(),
                y.mean(),
                extra["priorities"].mean() / 2,
                entropy.mean(),
                entropy_target.mean(),
                norm1,
                norm2,
                demo.detach(),
                batch.next_labelled.float().mean(),
                zero,
                finite.float(),
            ]
        )
        return values, extra["priorities"]

    def apply(self) -> None:
        """The optimiser steps of the gradients :meth:`compute` left (no host sync)."""
        self.q_optimizer.step()
        if self.agent_cfg.learn_alpha:
            self.alpha_optimizer.step()
        if self._options[0]["fused"]:
            # fused Adam writes the parameters without moving their version counters (seen on torch 2.13's CPU
            # kernel), which the networks' caches of derived weights are keyed by: moved here, or the no-grad
            # passes of the next update (the policy's entropy) would read the weights from before this one
            increment_version(self.q_optimizer.param_groups[0]["params"])

    def update_targets(self) -> None:
        """The soft target update (no host sync)."""
        soft_update(self.target1, self.q1, self.agent_cfg.tau)
        soft_update(self.target2, self.q2, self.agent_cfg.tau)

    @torch.no_grad()
    def _targets(self, batch: Batch, alpha: torch.Tensor, online_next=None):
        """TD targets ``[B]``, policy entropy on ``s'`` ``[B]`` and its target ``[B]``.

        ``online_next``: the online networks' Q on the next moves when the caller has them (the
        demonstrations); without dropout they stand in for the online policy's. When no transition
        bootstraps, the target networks are not run and the entropy comes from the online networks."""
        cfg = self.agent_cfg
        states = batch.next_actions.states
        chunk = CPU_ACTION_CHUNK if self.device.type == "cpu" else None
        plan = (
            self.target1.plan(batch.next_graphs, batch.next_actions, head_rows=False) if self.twins else None
        )

        def twin_min(nets: tuple[QNetwork, QNetwork], twin: TwinQ | None) -> torch.Tensor:
            if twin is not None:
                return twin(batch.next_graphs, batch.next_actions, plan)
            return torch.minimum(*(net(batch.next_graphs, batch.next_actions, chunk=chunk) for net in nets))

        def online_policy() -> torch.Tensor:
            if online_next is not None and self.net_cfg.dropout == 0.0:
                return torch.minimum(online_next[0].detach(), online_next[1].detach())
            with _eval_mode(self.q1, self.q2):
                return twin_min((self.q1, self.q2), self.twins and self.twins[1])

        if not batch.bootstraps:
            y = batch.reward.clone()
            entropy = policy_entropy(online_policy(), states, alpha)
        else:
            q_target = twin_min((self.target1, self.target2), self.twins and self.twins[0])
            y = td_target(batch.reward, batch.discount, batch.terminal, soft_value(q_target, states, alpha))
            q_policy = online_policy() if cfg.entropy_networks == "online" else q_target
            entropy = policy_entropy(q_policy, states, alpha)
        return y, entropy, target_entropy(states, cfg.target_entropy_fraction)

    # -- weights and checkpoints ----------------------------------------------------------------

    def policy_weights(self, device: torch.device | str = "cpu") -> dict[str, dict[str, torch.Tensor]]:
        """Copies of the online networks' parameters on ``device``, ``{"q1": state_dict, "q2": state_dict}``
        (on the learner's own device: no transfer, no wait for it)."""
        return {
            name: {k: v.detach().to(device, copy=True) for k, v in net.state_dict().items()}
            for name, net in (("q1", self.q1), ("q2", self.q2))
        }

    def policy_tensors(self) -> dict[str, dict[str, torch.Tensor]]:
        """The online networks' own parameters (not copies: they change with the next update), named as
        :meth:`policy_weights` names them; getting them makes no torch call."""
        return pair_tensors((self.q1, self.q2))

    def state_dict(self) -> dict:
        """Everything needed to continue bit-for-bit: networks, targets, optimisers, alpha, RNG, counters."""
        return {
            "format": CHECKPOINT_FORMAT,
            "net_cfg": dataclasses.asdict(self.net_cfg),
            "agent_cfg": dataclasses.asdict(self.agent_cfg),
            "q1": self.q1.state_dict(),
            "q2": self.q2.state_dict(),
            "target1": self.target1.state_dict(),
            "target2": self.target2.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "q_optimizer": self.q_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "rng": self.rng.get_state(),
            "steps": self.updates,
            "weights_version": self.weights_version,
        }

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict` (from a learner with the same configs)."""
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"checkpoint format {state.get('format')!r} is not {CHECKPOINT_FORMAT}")
        if state["net_cfg"] != dataclasses.asdict(self.net_cfg):
            raise ValueError("checkpoint was written for a different NetworkConfig")
        self._load_networks(state)
        for optimizer, options, name in zip(
            (self.q_optimizer, self.alpha_optimizer), self._options, ("q_optimizer", "alpha_optimizer")
        ):
            optimizer.load_state_dict(state[name])
            keep_options(optimizer, options)
        if self.graphs is not None:
            self.graphs = CudaGraphs(self)  # the optimiser's state tensors were replaced: capture anew
        self.rng.set_state(state["rng"].cpu())
        self.updates = int(state["steps"])
        self.weights_version = int(state["weights_version"])

    def _load_networks(self, state: dict) -> None:
        """The online and target networks and ``log alpha`` of a :meth:`state_dict`."""
        for name in ("q1", "q2", "target1", "target2"):
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])

    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint atomically (temporary file in the same directory, then rename)."""
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(self.state_dict(), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def warm_start(
        cls,
        path: str | os.PathLike,
        agent_cfg: AgentConfig,
        device: torch.device | str = "cpu",
        seed: int = 0,
    ) -> Learner:
        """A new learner (fresh optimisers, counters at 0, ``agent_cfg``) whose online and target
        networks and ``alpha`` come from the checkpoint at ``path`` (its network config is kept)."""
        state = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path}: not a learner checkpoint of format {CHECKPOINT_FORMAT}")
        learner = cls(NetworkConfig(**state["net_cfg"]), agent_cfg, device, seed=seed)
        learner._load_networks(state)
        return learner

    @classmethod
    def restore(cls, path: str | os.PathLike, device: torch.device | str = "cpu") -> Learner:
        """A learner from a checkpoint written by :meth:`save` (loaded with ``weights_only=True``)."""
        state = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
        learner = cls(NetworkConfig(**state["net_cfg"]), AgentConfig(**state["agent_cfg"]), device)
        learner.load_state_dict(state)
        return learner
