"""Acting: pick one action per state from the twin Q networks (batched, for the inference service)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from phylorl.agent.losses import soft_value
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.one_call import one_call
from phylorl.nets.qnet import QNetwork
from phylorl.nets.segment import Segments, segment_argmax
from phylorl.nets.twin import TwinQ


@torch.no_grad()
def select_actions(
    nets: "Sequence[QNetwork] | TwinQ",
    graphs: GraphBatch,
    actions: ActionBatch,
    alpha: float,
    greedy: bool,
    generator: torch.Generator | None = None,
    fast: bool = True,
    chunk: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """One action per state from ``Q = min_i Q_i(s, .)`` over ``nets`` (the twin online networks).

    ``greedy``: the action of highest ``Q``; otherwise a sample of ``softmax(Q / alpha)``
    (Gumbel-max, noise drawn from ``generator``). Each state must have at least one action.
    ``fast`` and ``chunk``: as in :meth:`QNetwork.forward`. ``nets`` may be a :class:`TwinQ` of the
    twins (the same ``min`` in one pass, for acting; ``fast`` and ``chunk`` do not apply to it).

    Returns ``(action [G] int64`` index into each state's own action list``, q [G]`` of that
    action``, v [G]`` soft value ``alpha * logsumexp(Q / alpha))``.
    """
    twin = isinstance(nets, TwinQ)
    if not twin and not nets:
        raise ValueError("select_actions needs at least one Q network")
    states = actions.states
    if states.count and int(states.sizes.min()) < 1:
        raise ValueError("every state needs at least one action to select from")
    for net in nets.nets if twin else nets:
        if net.training:
            raise ValueError("select_actions expects networks in eval mode (call .eval())")
    if twin:
        q = nets(graphs, actions)
    else:
        plan = nets[0].plan(graphs, actions) if fast else None  # input-only tensors, shared by the nets
        q = nets[0](graphs, actions, fast, None, chunk, plan)
        for net in nets[1:]:
            q = torch.minimum(q, net(graphs, actions, fast, None, chunk, plan))
    noise = None if greedy else torch.rand(q.shape, generator=generator, device=q.device, dtype=q.dtype)
    return choose(q, states, alpha, noise)


def choose(q: Tensor, states: Segments, alpha: "Tensor | float", noise: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """``(action, q, v)`` per state from every move's ``q`` (as :func:`select_actions` returns them): the move
    of highest ``q`` when ``noise`` is ``None``, else the Gumbel-max sample of ``softmax(q / alpha)`` drawn with
    ``noise`` (uniform ``[A]``). No host sync (it runs inside captured CUDA graphs)."""
    scores = q if noise is None else q / alpha - torch.log(-torch.log(noise))
    chosen = segment_argmax(scores, states)
    starts = torch.cumsum(states.sizes, 0) - states.sizes
    return chosen, q[starts + chosen], soft_value(q, states, alpha)


def _check_policy(weights: Mapping[str, Mapping[str, Tensor]]) -> None:
    missing = {"q1", "q2"} - set(weights)
    if missing:
        raise ValueError(f"policy weights lack {sorted(missing)}")


def pair_tensors(pair) -> dict[str, dict[str, Tensor]]:
    """The tensors of a network pair ``(q1, q2)`` themselves, named as :meth:`Learner.policy_weights` names its
    copies (``state_dict(keep_vars=True)``: no torch call)."""
    return {name: net.state_dict(keep_vars=True) for name, net in zip(("q1", "q2"), pair)}


def write_policy(pair, weights: Mapping[str, Mapping[str, Tensor]]) -> None:
    """Copy ``weights`` (as :func:`policy_networks` takes them; on any device) into the network pair ``pair`` in
    one torch call: each call lets the interpreter lock go and then waits to take it back from the process's other
    threads, and ``load_state_dict`` is a call per tensor. ``ValueError`` when the tensors are named otherwise."""
    _check_policy(weights)
    targets, sources = [], []
    for name, own in pair_tensors(pair).items():
        state = weights[name]
        if state.keys() != own.keys():
            raise ValueError(f"policy weights {name}: keys differ from the network's: "
                             f"{sorted(set(state) ^ set(own))}")
        targets += own.values()
        sources += (state[k] for k in own)
    with torch.no_grad():
        torch._foreach_copy_(targets, sources)


def policy_networks(cfg: NetworkConfig, weights: Mapping[str, Mapping[str, Tensor]],
                    device: torch.device | str = "cpu") -> tuple[QNetwork, QNetwork]:
    """The twin online networks in eval mode from :meth:`Learner.policy_weights` (``q1``, ``q2``)."""
    _check_policy(weights)
    nets = []
    for name in ("q1", "q2"):
        net = QNetwork(cfg)
        net.load_state_dict(weights[name])
        nets.append(net.to(device).eval())
    return nets[0], nets[1]


def answers_on_host(chosen: Tensor, q: Tensor, v: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]:
    """The first ``count`` answers of :func:`select_actions` (or of a padded batch's graph) copied to the host, in
    one torch call (waiting for the device): three slices and three copies made from Python were six calls, each
    letting the interpreter lock go and waiting to take it back (:mod:`phylorl.nets.one_call`)."""
    host_chosen, host_q, host_v, _ = _on_host()(chosen, q, v, count)
    return host_chosen, host_q, host_v


def _answers_kept(chosen: Tensor, q: Tensor, v: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
    """The first ``count`` of each on the host; the arguments returned too (kept to the end of the call)."""
    return chosen[:count].cpu(), q[:count].cpu(), v[:count].cpu(), [chosen, q, v]


@functools.cache
def _on_host():
    return one_call(_answers_kept)
