r"""``min(Q1, Q2)`` of the twin Q networks in one pass: the acting path, where a call is small.

Run as two networks, ``min(Q1(s, .), Q2(s, .))`` over the moves of a few trees is two sequences of some
hundred small tensor operations, whose fixed cost dominates on a CPU. :class:`TwinQ` stacks the two networks'
weights along a leading axis of size 2 and runs each operation once for both (batched products; one
``embedding_bag`` for both networks' attention sums and first head layers, the second network's rows offset
past the first's). Same parameters and maths as :meth:`QNetwork.forward`'s fast path (tests compare them);
inference only, and only for ``action_features="gather"`` with at least as many actions as nodes, else it
calls the two networks. :meth:`TwinQ.values` is the learner's side: both networks' ``Q`` of an update's taken
moves, with autograd.

The stacked weights are rebuilt when a parameter of either network changes (its version counter) or is
replaced; with ``cache=False`` on every call (inside a captured CUDA graph). With ``fused=True`` the last
three head layers of both networks run as one Triton kernel (:mod:`phylorl.nets.fused_head`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from phylorl.nets import fused_head
from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.qnet import InputPlan, QNetwork
from phylorl.nets.segment import segment_max, segment_mean, segment_sum, take


class TwinQ:
    """``min(Q1, Q2)`` of two :class:`QNetwork` of one config (see module docstring)."""

    def __init__(
        self, q1: QNetwork, q2: QNetwork, fused: bool = False, cache: bool = True, frozen: bool = False
    ):
        if q1.cfg != q2.cfg:
            raise ValueError("TwinQ needs two networks of the same config")
        if fused and not fused_head.supported(q1.cfg.head_hidden):
            raise ValueError(
                f"the fused head needs head_hidden a power of two >= {fused_head.BLOCK_N}, "
                f"got {q1.cfg.head_hidden}"
            )
        self.nets = (q1, q2)
        self.cfg = q1.cfg
        self.fused = fused
        self.cache = cache
        self.frozen = frozen
        """The networks' parameters never change (a published snapshot): stack them once, never check
        versions."""
        self._stacked: tuple | None = None

    def _weights(self) -> dict:
        if not self.cache:
            return self._stack()
        if self.frozen and self._stacked is not None:
            return self._stacked[1]
        params = [p for net in self.nets for p in net.parameters()]
        key = tuple((id(p), p._version) for p in params)
        if self._stacked is None or self._stacked[0] != key:
            self._stacked = (key, self._stack())
        return self._stacked[1]

    def _stack(self, few: bool = False) -> dict:
        """Both networks' weights, stacked (with autograd when it records); ``few``: the head's first layer
        for few actions (factored, ``[2, 4h + K, hh]``) instead of its per-node and metadata rows."""
        a, b = self.nets
        da, db = a.derived_weights(), b.derived_weights()

        def both(f):
            return torch.stack([f(a, da), f(b, db)]).contiguous()

        stacked = {
            "enc_w": both(lambda n, d: n.node_encoder.weight.t()),  # [2, F, h]
            "enc_b": both(lambda n, d: n.node_encoder.bias).unsqueeze(1),  # [2, 1, h]
            "gat": [
                (
                    both(lambda n, d, i=i: d["gat"][i][0]),  # [2, h, H*C + 2H]
                    both(lambda n, d, i=i: d["gat"][i][1]),  # [2, D, H]
                    both(lambda n, d, i=i: n.convs[i].bias).unsqueeze(1),
                )  # [2, 1, h]
                for i in range(len(a.convs))
            ],
            "tree_t": both(lambda n, d: d["tree_t"]),  # [2, 3h, hh]
            "tree_b": both(lambda n, d: d["tree_bias"]).unsqueeze(1),  # [2, 1, hh]
            "w2": both(lambda n, d: n.head2.weight.t()),  # [2, hh, hh]
            "b2": both(lambda n, d: n.head2.bias).unsqueeze(1),
            "w3": both(lambda n, d: n.head3.weight.t()),  # [2, hh, 1]
            "b3": both(lambda n, d: n.head3.bias).unsqueeze(1),
        }
        if few:
            stacked["combined_t"] = both(lambda n, d: d["combined_t"])  # [2, 4h + K, hh]
        else:
            stacked["w_nodes"] = both(lambda n, d: d["w_nodes"])  # [2, h, 4 hh]
            stacked["meta_rows"] = both(lambda n, d: d["meta_rows"])  # [2, K, hh]
        return stacked

    @torch.no_grad()
    def __call__(
        self, graphs: GraphBatch, actions: ActionBatch, plan: InputPlan | None = None, reduce: str = "min"
    ) -> Tensor:
        """``min(Q1, Q2)`` (``reduce="mean"``: their mean) of every action, float ``[A]`` (networks in eval
        mode)."""
        if reduce not in ("min", "mean"):
            raise ValueError(f"reduce must be min or mean, got {reduce!r}")
        a, b = self.nets
        if a.training or b.training:
            raise ValueError("TwinQ is for acting: put the networks in eval mode")
        if actions.states.count != graphs.num_graphs:
            raise ValueError(
                f"actions are grouped into {actions.states.count} states but there are "
                f"{graphs.num_graphs} trees"
            )
        plan = plan if plan is not None else a.plan(graphs, actions, head_rows=not self.fused)
        few = actions.nodes.shape[0] < graphs.x.shape[0]  # fewer actions than nodes: the networks' own path
        if few or not self._stacks(graphs, actions) or (plan.rows is None and not self.fused):
            both = torch.stack([a(graphs, actions, True, plan=plan), b(graphs, actions, True, plan=plan)])
        else:
            w = self._weights()
            nodes, tree = self._encode(graphs, plan, w)
            both = self._head(nodes, tree, graphs, actions, plan, w)
        return both.amin(0) if reduce == "min" else both.mean(0)

    def values(self, graphs: GraphBatch, actions: ActionBatch, plan: InputPlan | None = None) -> Tensor:
        """``Q`` of both networks, ``[2, A]``, for fewer actions than nodes (an update's taken moves), with
        autograd: the online networks' forward of an update as one stacked pass (and so its backward). Same
        function as two :meth:`QNetwork.forward` calls on the fast path up to float32 rounding; without
        dropout (:meth:`applies_with_grad`)."""
        if not self.applies_with_grad(graphs, actions):
            raise ValueError("TwinQ.values takes fewer actions than nodes, a gather config and no dropout")
        a = self.nets[0]
        plan = plan if plan is not None else a.plan(graphs, actions, head_rows=False)
        gathers = a._gathers()
        w = self._stack(few=True)
        nodes, tree = self._encode(graphs, plan, w, gathers=gathers)
        n = actions.nodes.shape[0]
        inputs = torch.cat(
            [nodes.index_select(1, actions.nodes.reshape(-1)).view(2, n, -1), actions.meta.expand(2, -1, -1)],
            dim=2,
        )  # [2, A, 4h + K]
        per_tree = torch.baddbmm(w["tree_b"], tree, w["tree_t"])  # [2, G, hh]
        z = torch.relu(torch.baddbmm(per_tree.index_select(1, actions.states.index), inputs, w["combined_t"]))
        z = torch.relu(torch.baddbmm(w["b2"], z, w["w2"]))
        return torch.baddbmm(w["b3"], z, w["w3"]).squeeze(-1)

    def applies_with_grad(self, graphs: GraphBatch, actions: ActionBatch) -> bool:
        """Whether :meth:`values` takes this batch: fewer actions than nodes, the networks' input widths, and
        no dropout in training mode."""
        a, b = self.nets
        few = actions.nodes.shape[0] < graphs.x.shape[0]
        return few and self._stacks(graphs, actions) and not (self.cfg.dropout and (a.training or b.training))

    def _stacks(self, graphs: GraphBatch, actions: ActionBatch) -> bool:
        """Whether the stacked pass takes the batch: a ``gather`` config and the networks' input widths."""
        return (
            self.cfg.action_features == "gather"
            and graphs.x.shape[1] == self.cfg.node_features
            and actions.meta.shape[1] == self.cfg.action_meta
        )

    def _encode(
        self, graphs: GraphBatch, plan: InputPlan, w: dict, gathers: bool = False
    ) -> tuple[Tensor, Tensor]:
        cfg, slots = self.cfg, plan.slots
        n, heads, channels = graphs.x.shape[0], cfg.heads, cfg.hidden // cfg.heads
        x = torch.relu(torch.baddbmm(w["enc_b"], graphs.x.expand(2, -1, -1), w["enc_w"]))  # [2, N, h]
        rows = torch.cat([slots.rows, slots.rows + n * heads])  # the second network's rows follow the first's
        for conv, (w_all, edge_coef, bias) in zip(self.nets[0].convs, w["gat"]):
            xl, a_src, a_dst = torch.bmm(x, w_all).split([heads * channels, heads, heads], dim=2)
            logits = (
                a_src[:, slots.nodes] + a_dst.unsqueeze(2) + torch.matmul(slots.attr, edge_coef.unsqueeze(1))
            )
            logits = F.leaky_relu(logits, conv.negative_slope)
            logits = logits.masked_fill(~slots.mask.unsqueeze(-1), float("-inf"))  # [2, N, S, H]
            attention = torch.softmax(logits, dim=2).transpose(2, 3).reshape(2 * n * heads, -1)
            table = xl.reshape(2 * n * heads, channels)
            if gathers:  # QNetwork.capture_safe: gathers and a sum instead of embedding_bag (same values)
                out = (take(table, rows) * attention.unsqueeze(-1)).sum(1)
            else:
                out = F.embedding_bag(rows, table, per_sample_weights=attention, mode="sum")
            x = torch.relu(out.view(2, n, heads * channels) + bias) + x
        flat = x.transpose(0, 1).reshape(n, -1)  # [N, 2h]: pool both networks' embeddings at once
        seg = graphs.nodes
        pooled = [f(flat, seg).view(-1, 2, cfg.hidden) for f in (segment_sum, segment_mean, segment_max)]
        tree = torch.cat(pooled, dim=2).transpose(0, 1)  # [2, G, 3h]
        return x, tree

    def _head(
        self, nodes: Tensor, tree: Tensor, graphs: GraphBatch, actions: ActionBatch, plan: InputPlan, w: dict
    ) -> Tensor:
        hh = self.cfg.head_hidden
        per_tree = torch.baddbmm(w["tree_b"], tree, w["tree_t"])  # [2, G, hh]
        per_node = torch.bmm(nodes, w["w_nodes"]).view(2, -1, hh)  # row 4 v + r = C_r h_v, per network
        if self.fused:  # the tree's row joins each node's role-0 row: a move's nodes are all in its tree
            per_node.view(2, -1, 4, hh)[:, :, 0] += per_tree[:, graphs.nodes.index]
            return fused_head.fused_twin_head(
                per_node,
                actions.nodes,
                actions.meta,
                w["meta_rows"],
                w["w2"],
                w["b2"].view(2, hh),
                w["w3"].view(2, hh),
                w["b3"].view(2),
            )
        table = torch.cat([per_node, per_tree, w["meta_rows"]], dim=1)  # [2, R, hh]
        size = table.shape[1]
        rows = torch.cat([plan.rows, plan.rows + size])
        weights = plan.weights.repeat(2, 1)
        z = F.embedding_bag(rows, table.view(2 * size, hh), per_sample_weights=weights, mode="sum")
        z = torch.relu_(z).view(2, -1, hh)
        z = torch.relu_(torch.baddbmm(w["b2"], z, w["w2"]))
        return torch.baddbmm(w["b3"], z, w["w3"]).squeeze(-1)  # [2, A]

    def __repr__(self) -> str:
        return f"TwinQ({self.cfg}{', fused' if self.fused else ''})"


def twin_or_none(nets, fused: bool = False, frozen: bool = False) -> TwinQ | None:
    """A :class:`TwinQ` (``fused``, ``frozen``: see it) for ``nets`` when it applies (two networks of one
    ``gather`` config), else ``None``."""
    if len(nets) != 2 or nets[0].cfg != nets[1].cfg or nets[0].cfg.action_features != "gather":
        return None
    return TwinQ(nets[0], nets[1], fused=fused, frozen=frozen)
