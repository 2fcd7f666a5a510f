r"""Twin soft-Q losses, temperature loss and target updates (pure functions over tensors).

The policy is implicit: :math:`\pi(a|s) \propto \exp(Q(s,a)/\alpha)` over the actions of ``s``, so

.. math::
    V(s) = \alpha \log \sum_{a \in A_s} \exp(Q(s,a)/\alpha), \qquad
    y = r + \gamma_k (1 - \mathrm{terminal})\, V_{\bar\theta}(s'),

with :math:`Q = \min(Q_{\bar\theta_1}, Q_{\bar\theta_2})` of the target networks in ``V``; every sum over
actions is a segment reduction. A truncated transition (time limit) bootstraps; only a true terminal does not.

The temperature follows :math:`\min_{\log\alpha}\ \log\alpha\,(\mathcal H(\pi(\cdot|s')) - \bar{\mathcal
H}_{s'})` with target :math:`\bar{\mathcal H}_{s'} = f \log|A_{s'}|`: ``alpha`` falls when the policy is more
random than the target, and rises otherwise. The entropy is the online networks' policy's on the batch's next
states (``AgentConfig.entropy_networks="target"``: the target networks'), detached, so only ``alpha`` moves.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from phylorl.nets.segment import Segments, segment_log_softmax, segment_logsumexp, segment_sum


def soft_value(q: Tensor, states: Segments, alpha: Tensor | float) -> Tensor:
    """``V(s) = alpha * logsumexp(Q(s, .) / alpha)`` per state: ``q [A] -> [G]`` (``-inf`` for a state without
    actions)."""
    return alpha * segment_logsumexp(q / alpha, states)


def policy_entropy(q: Tensor, states: Segments, alpha: Tensor | float) -> Tensor:
    """Entropy (nats) of ``softmax(Q / alpha)`` per state: ``q [A] -> [G]`` (0 for no actions)."""
    log_p = segment_log_softmax(q / alpha, states)
    return -segment_sum(torch.exp(log_p) * log_p, states)


def target_entropy(states: Segments, fraction: float) -> Tensor:
    """``fraction * log |A_s|`` per state (0 for states with at most one action): ``[G]``."""
    sizes = states.sizes.clamp(min=1).to(torch.float32)
    return fraction * torch.log(sizes)


def td_target(reward: Tensor, discount: Tensor, terminal: Tensor, next_value: Tensor) -> Tensor:
    """``y = r + discount * V(s')`` where ``s'`` is not terminal, ``y = r`` where it is (``[B]``; ``terminal``
    bool, truncation is not terminal). ``next_value`` may be ``-inf`` or NaN at terminal states; it is ignored
    there."""
    bootstrap = torch.where(terminal, torch.zeros_like(next_value), discount * next_value)
    return reward + bootstrap


def critic_loss(q1: Tensor, q2: Tensor, target: Tensor, weights: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Importance-weighted squared TD errors of both Q networks (``q1, q2, target, weights``: ``[B]``):
    ``(loss, extra)``, ``loss = mean(w * td1^2) + mean(w * td2^2)``, ``extra`` holding ``td1``, ``td2``
    (``target - q``), ``priorities`` (``|td1| + |td2|``), ``loss1``, ``loss2`` (all detached)."""
    target = target.detach()
    td1, td2 = target - q1, target - q2
    loss1 = (weights * td1.square()).mean()
    loss2 = (weights * td2.square()).mean()
    td1, td2 = td1.detach(), td2.detach()
    extra = {
        "td1": td1,
        "td2": td2,
        "priorities": td1.abs() + td2.abs(),
        "loss1": loss1.detach(),
        "loss2": loss2.detach(),
    }
    return loss1 + loss2, extra


def demonstration_loss(
    q: Tensor, labels: Tensor, states: Segments, labelled: Tensor, temperature: float, rank_weight: float
) -> tuple[Tensor, Tensor, Tensor]:
    """Supervised loss of ``Q`` against every move's label on the labelled states: ``q, labels [A]`` grouped
    into ``G`` states by ``states``, ``labelled [G]`` bool. Returns ``(loss, mse, ce)``: the squared error
    averaged over the labelled states' moves, plus ``rank_weight`` times the listwise cross-entropy between
    ``softmax(labels / T)`` and ``softmax(Q / T)`` (``T = temperature``) averaged over labelled states; zero
    (with a gradient path) when none is labelled."""
    mask = labelled[states.index].to(q.dtype)
    n_moves = mask.sum().clamp(min=1.0)
    n_states = labelled.sum().clamp(min=1).to(q.dtype)
    mse = (mask * (q - labels).square()).sum() / n_moves
    target = torch.exp(segment_log_softmax(labels / temperature, states))
    ce = -(mask * target * segment_log_softmax(q / temperature, states)).sum() / n_states
    return mse + rank_weight * ce, mse, ce


def alpha_loss(log_alpha: Tensor, entropy: Tensor, entropy_target: Tensor) -> Tensor:
    """``mean(log_alpha * (H - H_target))`` over states; gradient only reaches ``log_alpha``."""
    return (log_alpha * (entropy - entropy_target).detach()).mean()


@torch.no_grad()
def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``theta' <- tau * theta + (1 - tau) * theta'`` for every parameter and float buffer, in place."""
    t_params = [p for p in target.parameters()]
    o_params = [p for p in online.parameters()]
    if len(t_params) != len(o_params):
        raise ValueError("target and online networks have different parameter lists")
    torch._foreach_mul_(t_params, 1.0 - tau)
    torch._foreach_add_(t_params, o_params, alpha=tau)
    for tb, ob in zip(target.buffers(), online.buffers()):
        if tb.is_floating_point():
            tb.mul_(1.0 - tau).add_(ob, alpha=tau)
        else:
            tb.copy_(ob)


def clip_grad_norm(module: nn.Module, max_norm: float | None) -> Tensor:
    """Scale ``module``'s gradients to L2 norm at most ``max_norm``; returns the norm before clipping."""
    return nn.utils.clip_grad_norm_(module.parameters(), math.inf if max_norm is None else max_norm)
