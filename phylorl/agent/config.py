"""Hyperparameters of the twin soft-Q learner (one frozen dataclass)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AgentConfig:
    """How the learner updates its two Q networks, their targets and the temperature ``alpha``."""

    lr: float = 3e-4
    """Adam learning rate of the Q networks."""

    alpha_lr: float = 3e-4
    """Adam learning rate of ``log alpha``."""

    initial_alpha: float = 0.05
    """Starting temperature ``alpha`` (in reward units, like Q)."""

    learn_alpha: bool = True
    """Adapt ``alpha`` toward the target entropy; ``False`` keeps ``initial_alpha``."""

    target_entropy_fraction: float = 0.5
    """Target policy entropy per state as a fraction of the maximum ``log |A_s|`` (nats)."""

    entropy_networks: Literal["online", "target"] = "online"
    """Whose policy's entropy on the next states drives ``alpha``: the online networks' (the current policy;
    two extra forward passes over every next action) or the target networks' (reuses ``V(s')``'s Q-values:
    half the next-state work, a policy lagging by ``~1/tau`` updates)."""

    tau: float = 0.005
    """Soft target update ``theta' <- tau theta + (1 - tau) theta'``."""

    target_update_period: int = 1
    """Apply the soft target update every this many learner steps."""

    max_grad_norm: float | None = 10.0
    """Clip each Q network's gradient to this L2 norm (``None``: no clipping)."""

    cuda_graphs: bool = False
    """On a CUDA device, replay each update as two captured CUDA graphs (:mod:`phylorl.agent.capture`) instead
    of launching its few hundred kernels one by one: a batch shape is captured after 2 eager updates, at most
    8 shapes; others run eagerly. Needs no dropout. Equal to eager updates up to float32 rounding
    (tests/gpu/test_cuda_graphs.py)."""

    fused_head: bool = False
    """On a CUDA device, evaluate the no-grad passes over every next move (the targets' ``V(s')``, the online
    policy's entropy) as twin pairs whose head layers run as one Triton kernel
    (:mod:`phylorl.nets.fused_head`). Needs Triton and a power-of-two ``head_hidden``; the same values up to
    float32 rounding (TF32 where ``torch.backends.cuda.matmul.allow_tf32``). The inference endpoint on a GPU
    uses it too. Ignored on the CPU."""

    demo_weight: float = 0.0
    """Weight of the supervised term on demonstration labels (``Transition.next_labels``: the reward of every
    move of a next state): squared error plus a listwise cross-entropy of each online network on those moves.
    0 ignores labels."""

    demo_temperature: float = 0.02
    """Softmax temperature of the demonstrations' listwise cross-entropy, in reward units."""

    demo_rank_weight: float = 1.0
    """Weight of that cross-entropy against the squared error."""

    def __post_init__(self) -> None:
        if not (self.demo_weight >= 0 and self.demo_rank_weight >= 0 and self.demo_temperature > 0):
            raise ValueError(
                "AgentConfig.demo_weight and demo_rank_weight must be >= 0, demo_temperature > 0"
            )
        for name in ("lr", "alpha_lr", "initial_alpha"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"AgentConfig.{name} must be positive and finite, got {value}")
        rules = (
            ("target_entropy_fraction", 0.0 <= self.target_entropy_fraction <= 1.0, "in [0, 1]"),
            ("tau", 0.0 < self.tau <= 1.0, "in (0, 1]"),
            ("target_update_period", not self.target_update_period < 1, ">= 1"),
            ("max_grad_norm", self.max_grad_norm is None or self.max_grad_norm > 0, "positive or None"),
            ("entropy_networks", self.entropy_networks in ("online", "target"), "'online' or 'target'"),
        )
        for name, ok, rule in rules:
            if not ok:
                raise ValueError(f"AgentConfig.{name} must be {rule}, got {getattr(self, name)!r}")
