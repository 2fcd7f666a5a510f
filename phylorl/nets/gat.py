r"""GAT layer on a dense neighbour table (the fast path of PyG's ``GATConv`` on trees).

For node :math:`i` with neighbours :math:`j \in \mathcal{N}(i)` (plus :math:`i` itself when self loops are
on), PyG's ``GATConv`` with ``H`` heads of ``C`` channels, edge features :math:`e_{ij}` and ``concat=True``
computes, per head :math:`h`,

.. math::
    \alpha_{ij} = \mathrm{softmax}_j\big(\mathrm{LeakyReLU}_{0.2}(
        a_s^\top W x_j + a_d^\top W x_i + a_e^\top W_e e_{ij})\big), \qquad
    x_i' = \big\Vert_h \sum_j \alpha_{ij} W x_j + b.

A self loop's edge feature is the mean of the node's incoming edge features (``fill_value='mean'``). Tree
nodes have at most 3 neighbours, so the softmax runs over at most 4 slots of a dense table: same parameters,
same maths, static shapes. :class:`TreeGATConv` holds exactly ``GATConv``'s parameters without importing PyG
(seconds of start-up); ``tests/oracles/network.py`` runs PyG's own ``GATConv`` on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from phylorl.nets.inputs import GraphBatch
from phylorl.nets.segment import take


class _Weight(nn.Module):
    """A bias-free linear layer's weight ``[out, in]`` under the name PyG's ``Linear`` gives it."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels))


def _glorot(value: Tensor) -> None:
    """PyG's ``glorot`` initialisation (uniform in ``±sqrt(6 / (fan_in + fan_out))`` over the last two
    dimensions)."""
    bound = math.sqrt(6.0 / (value.size(-2) + value.size(-1)))
    with torch.no_grad():
        value.uniform_(-bound, bound)


class TreeGATConv(nn.Module):
    """The parameters of PyG's ``GATConv(in_channels, out_channels, heads, concat=True, edge_dim=edge_dim,
    add_self_loops=self_loops)`` (same names, shapes and order), initialised drawing the same random numbers,
    so a seed gives the same network and checkpoints of either load into the other. :func:`dense_gat` reads
    them."""

    negative_slope = 0.2

    def __init__(
        self, in_channels: int, out_channels: int, heads: int, edge_dim: int, self_loops: bool = True
    ):
        super().__init__()
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.edge_dim, self.add_self_loops = edge_dim, self_loops
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        self.bias = nn.Parameter(torch.empty(heads * out_channels))
        self.lin = _Weight(in_channels, heads * out_channels)
        self.lin_edge = _Weight(edge_dim, heads * out_channels)
        # GATConv's order of draws: each Linear initialises itself when made, then reset_parameters() draws
        # again
        lin, edge = self.lin.weight, self.lin_edge.weight
        for weight in (lin, edge, lin, edge, self.att_src, self.att_dst, self.att_edge):
            _glorot(weight)
        with torch.no_grad():
            self.bias.zero_()


@dataclass
class DenseSlots:
    """Attention slots of every node, shared by all GAT layers of one forward.

    ``nodes`` int64 ``[N, S]``: the node each slot reads (3 neighbour slots, then the node itself with self
    loops); ``attr`` float ``[N, S, D]``: each slot's edge feature; ``mask`` bool ``[N, S]``: the real slots;
    ``rows`` int64 ``[N * heads, S]``: row ``v * heads + h`` (head ``h`` of the slot's node) of a ``[N *
    heads, C]`` view of the transformed features, built for ``heads``."""

    nodes: Tensor
    attr: Tensor
    mask: Tensor
    rows: Tensor
    heads: int


def dense_slots(graphs: GraphBatch, heads: int, self_loops: bool) -> DenseSlots:
    """Slots from the batch's neighbour table (self-loop feature: mean of the incoming ones)."""
    nodes, attr, mask = graphs.neighbors, graphs.neighbor_attr, graphs.neighbor_mask
    if self_loops:
        n = nodes.shape[0]
        degree = mask.sum(1, keepdim=True).clamp(min=1).to(attr.dtype)
        self_attr = attr.sum(1) / degree  # padding slots hold 0
        nodes = torch.cat([nodes, torch.arange(n, device=nodes.device).unsqueeze(1)], dim=1)
        attr = torch.cat([attr, self_attr.unsqueeze(1)], dim=1)
        mask = torch.cat([mask, mask.new_ones(n, 1)], dim=1)
    head_ids = torch.arange(heads, device=nodes.device).view(1, heads, 1)
    rows = (nodes.unsqueeze(1) * heads + head_ids).reshape(-1, nodes.shape[1])
    return DenseSlots(nodes=nodes, attr=attr, mask=mask, rows=rows, heads=heads)


def gat_weights(conv: TreeGATConv) -> tuple[Tensor, Tensor]:
    """The parts of :func:`dense_gat` that depend on the weights alone: ``[W; a_s^T W; a_d^T W]^T``
    ``[in, H*C + 2H]`` (node transform and both attention terms in one product) and the edge
    coefficients ``a_e^T W_e`` ``[D, H]``."""
    heads, channels = conv.heads, conv.out_channels
    w = conv.lin.weight  # [H*C, in]
    w_heads = w.view(heads, channels, -1)
    # a_s^T W x and a_d^T W x per head fold into one [2H, in] product; likewise a_e^T W_e e -> [D, H]
    att = [(w_heads * a.view(heads, channels, 1)).sum(1) for a in (conv.att_src, conv.att_dst)]
    w_all = torch.cat([w, *att]).t().contiguous()
    w_edge = conv.lin_edge.weight.view(heads, channels, -1)
    edge_coef = (w_edge * conv.att_edge.view(heads, channels, 1)).sum(1).t().contiguous()  # [D, H]
    return w_all, edge_coef


def dense_gat(
    conv: TreeGATConv,
    x: Tensor,
    slots: DenseSlots,
    weights: tuple[Tensor, Tensor] | None = None,
    capture_safe: bool = False,
) -> Tensor:
    """Apply ``conv`` (GATConv's function: ``concat=True``, ``edge_dim`` set, no residual) to ``x`` ``[N,
    in]`` -> ``[N, heads * out_channels]``, the slots built with the conv's ``heads`` and ``add_self_loops``.
    ``weights``: :func:`gat_weights` of ``conv``, when the caller has them. ``capture_safe``: gather and sum
    instead of ``embedding_bag``, whose CUDA backward syncs with the host and so cannot be captured in a CUDA
    graph (same values up to rounding)."""
    heads, channels = conv.heads, conv.out_channels
    if slots.heads != heads:
        raise ValueError(f"slots were built for {slots.heads} heads, the layer has {heads}")
    n = x.shape[0]
    w_all, edge_coef = gat_weights(conv) if weights is None else weights
    xl, a_src, a_dst = (x @ w_all).split([heads * channels, heads, heads], dim=1)  # [N, H*C], [N, H] x 2

    logits = take(a_src, slots.nodes) + a_dst.unsqueeze(1) + slots.attr @ edge_coef  # [N, S, H]
    logits = F.leaky_relu(logits, conv.negative_slope)
    logits = logits.masked_fill(~slots.mask.unsqueeze(-1), float("-inf"))
    attention = torch.softmax(logits, dim=1).transpose(1, 2).reshape(n * heads, -1)  # [N*H, S]
    # out[v, h] = sum_s attention[v, s, h] * xl[slot node, h]: one weighted gather-sum per (v, h)
    if capture_safe:
        out = (take(xl.reshape(n * heads, channels), slots.rows) * attention.unsqueeze(-1)).sum(1)
    else:
        out = F.embedding_bag(
            slots.rows, xl.reshape(n * heads, channels), per_sample_weights=attention, mode="sum"
        )
    out = out.view(n, heads * channels)
    return out + conv.bias if conv.bias is not None else out
