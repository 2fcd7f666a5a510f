r"""One Q network: GAT tree encoder, action encoder, Q head.

.. math::
    Q(s, a) = w_3^\top \mathrm{relu}(W_2\, \mathrm{relu}(W_1 [t(s); W_{enc} u(a) + b_{enc}] + b_1) + b_2) +
    b_3

with ``t(s)`` the pooled tree embedding (sum, mean, max of the GAT node embeddings) and ``u(a)`` the
action input: ``[h_p; h_s; h_x; h_y; meta]`` (the move's node embeddings, ``"gather"``) or
``[p; s; x; y; meta]`` (node ids as numbers, ``"indices"``). The action encoder is one linear layer,
as first designed (the original diagram gives the node encoder a ReLU, the action encoder none).

The forward runs :func:`~phylorl.nets.gat.dense_gat` over the dense neighbour table, pools by reshape when all
trees have the same size, and factors the head's first layer: ``W_1 [t; W_enc u + b_enc] = (W_t t + b_1 + W_a
b_enc) + C u`` with ``C = W_a W_enc``, the first term once per tree. With many actions and ``"gather"``, ``C
u`` is ``sum_r C_r h_{node_r} + C_m meta`` with ``C_r h_v`` once per node and role, so an action costs one
weighted gather-sum of rows (``embedding_bag``) instead of a ``1027 x 256`` product.
``tests/oracles/network.py`` runs the function as first designed (PyG ``GATConv``, PyG pooling, unfactored
layers) on the same parameters; the tests hold the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from phylorl.nets.config import NetworkConfig
from phylorl.nets.gat import DenseSlots, TreeGATConv, dense_gat, dense_slots, gat_weights
from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.segment import segment_max, segment_mean, segment_sum, take

MOVE_NODES = 4


@dataclass
class InputPlan:
    """Tensors of the fast forward that depend on the inputs alone, built once for networks of one config
    reading the same batch: the GAT's attention slots and, with many actions, each action's ``embedding_bag``
    rows and weights in the head's first layer."""

    slots: DenseSlots
    rows: Tensor | None = None
    weights: Tensor | None = None


def dropout(x: Tensor, p: float, training: bool, generator: torch.Generator | None) -> Tensor:
    """Inverted dropout drawing its mask from ``generator`` (so a learner can own its RNG)."""
    if not training or p == 0.0:
        return x
    keep = torch.empty_like(x).bernoulli_(1.0 - p, generator=generator)
    return x * keep / (1.0 - p)


class QNetwork(nn.Module):
    """``Q(s, a)`` for every action of every state in a batch: ``G`` trees with ``N`` nodes in all and ``A``
    moves in all -> ``[A]``."""

    def __init__(self, cfg: NetworkConfig = NetworkConfig()):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden
        self.node_encoder = nn.Linear(cfg.node_features, h)
        self.convs = nn.ModuleList(
            TreeGATConv(
                h, h // cfg.heads, heads=cfg.heads, edge_dim=cfg.edge_features, self_loops=cfg.gat_self_loops
            )
            for _ in range(cfg.gat_layers)
        )
        action_in = (MOVE_NODES * h if cfg.action_features == "gather" else MOVE_NODES) + cfg.action_meta
        self.action_encoder = nn.Linear(action_in, cfg.action_hidden)
        self.head1 = nn.Linear(cfg.tree_embedding + cfg.action_hidden, cfg.head_hidden)
        self.head2 = nn.Linear(cfg.head_hidden, cfg.head_hidden)
        self.head3 = nn.Linear(cfg.head_hidden, 1)
        self._derived: tuple | None = None  # (parameter versions, derived weights) while no grad is recorded
        self.cache_derived = True
        """Reuse the derived weights between calls without autograd (off where calls are captured in a CUDA
        graph, which would bake a cached tensor in)."""
        self.capture_safe = False
        """Where autograd records, gather-and-sum instead of ``embedding_bag`` (whose CUDA backward cannot be
        captured in a CUDA graph); same function up to rounding."""

    def _gathers(self) -> bool:
        return self.capture_safe and torch.is_grad_enabled()

    def derived_weights(self) -> dict:
        """Tensors of the fast forward that depend on the parameters alone (the GAT layers' folded attention
        weights, the factored first layer of the head). Without autograd they are reused until a parameter
        changes (its version counter) or is replaced."""
        if torch.is_grad_enabled() or not self.cache_derived:
            return self._derive()
        params = list(self.parameters())
        key = tuple((id(p), p._version) for p in params)
        if self._derived is None or self._derived[0] != key:
            self._derived = (key, self._derive())
        return self._derived[1]

    def _derive(self) -> dict:
        cfg = self.cfg
        h, hh, t = cfg.hidden, cfg.head_hidden, cfg.tree_embedding
        w_action = self.head1.weight[:, t:]
        combined = w_action @ self.action_encoder.weight  # C: [head_hidden, action_in]
        out = {
            "gat": [gat_weights(conv) for conv in self.convs],
            "combined_t": combined.t(),
            "tree_t": self.head1.weight[:, :t].t(),
            "tree_bias": self.head1.bias + w_action @ self.action_encoder.bias,
        }
        if cfg.action_features == "gather":
            out["w_nodes"] = (
                combined[:, : MOVE_NODES * h].reshape(hh, MOVE_NODES, h).permute(2, 1, 0).reshape(h, -1)
            )
            out["meta_rows"] = combined[:, MOVE_NODES * h :].t()
        return out

    def plan(self, graphs: GraphBatch, actions: ActionBatch, head_rows: bool = True) -> InputPlan:
        """The :class:`InputPlan` of a batch (valid for every network with this one's config);
        ``head_rows=False`` leaves out the head's ``embedding_bag`` rows (for the fused head, which reads the
        moves' nodes)."""
        cfg = self.cfg
        slots = dense_slots(graphs, cfg.heads, cfg.gat_self_loops)
        n_actions, n_nodes = actions.nodes.shape[0], graphs.x.shape[0]
        if cfg.action_features == "indices" or n_actions < n_nodes or not head_rows:
            return InputPlan(slots)
        k, device = cfg.action_meta, actions.nodes.device
        tree_row = MOVE_NODES * n_nodes
        meta_row = tree_row + graphs.num_graphs
        roles = torch.arange(MOVE_NODES, device=device)
        rows = torch.cat(
            [
                actions.nodes * MOVE_NODES + roles,
                (actions.states.index + tree_row).unsqueeze(1),
                (torch.arange(k, device=device) + meta_row).expand(n_actions, k),
            ],
            dim=1,
        )
        weights = torch.cat([actions.meta.new_ones(n_actions, MOVE_NODES + 1), actions.meta], dim=1)
        return InputPlan(slots, rows, weights)

    # -- tree encoder ---------------------------------------------------------------------------

    def encode(self, graphs: GraphBatch, plan: InputPlan | None = None) -> tuple[Tensor, Tensor]:
        """Node embeddings ``[N, hidden]`` and tree embeddings ``[G, 3 * hidden]`` (sum, mean, max)."""
        if graphs.x.shape[1] != self.cfg.node_features or graphs.edge_attr.shape[1] != self.cfg.edge_features:
            raise ValueError(
                f"graphs have {graphs.x.shape[1]} node and {graphs.edge_attr.shape[1]} edge features, the "
                f"network ({self.cfg.features}) reads {self.cfg.node_features} and "
                f"{self.cfg.edge_features}"
            )
        slots = (
            plan.slots if plan is not None else dense_slots(graphs, self.cfg.heads, self.cfg.gat_self_loops)
        )
        return _encode(self, graphs, slots, self.derived_weights()["gat"])

    # -- action encoder and Q head -------------------------------------------------------------

    def action_input(self, nodes: Tensor, graphs: GraphBatch, actions: ActionBatch) -> Tensor:
        """The action encoder's input per action: ``[A, 4 * hidden + K]`` (gather) or ``[A, 4 + K]``."""
        if self.cfg.action_features == "gather":
            gathered = take(nodes, actions.nodes).reshape(actions.nodes.shape[0], -1)  # [A, 4 * hidden]
            return torch.cat([gathered, actions.meta], dim=1)
        local = actions.nodes - graphs.node_offset[actions.states.index].unsqueeze(1)
        return torch.cat([local.to(actions.meta.dtype), actions.meta], dim=1)

    def _first_layer(
        self, nodes, tree, graphs, actions, plan: InputPlan | None = None
    ) -> Tensor | tuple[Tensor, Tensor, Tensor]:
        """The first layer's pre-activation ``[A, head_hidden]``, or with many actions the ``(table, rows,
        weights)`` of an ``embedding_bag`` that computes it (so it can run in chunks)."""
        # head1([t; enc(u)]) = W_t t + b_1 + W_a b_enc + (W_a W_enc) u: a per-tree part plus C u
        cfg = self.cfg
        derived = self.derived_weights()
        per_tree = torch.addmm(derived["tree_bias"], tree, derived["tree_t"])
        n_actions, n_nodes, hh = actions.nodes.shape[0], nodes.shape[0], cfg.head_hidden
        if cfg.action_features == "indices" or n_actions < n_nodes:
            # few actions (e.g. the chosen one per state): apply C to each action's input
            z = self.action_input(nodes, graphs, actions) @ derived["combined_t"]
            if actions.states.uniform:
                return (z.view(actions.states.count, -1, hh) + per_tree.unsqueeze(1)).view(z.shape)
            return z + take(per_tree, actions.states.index)
        # many actions: C_r h_v once per node and role r, then each action sums 4 rows, its tree's
        # row and its metadata rows (one embedding_bag: a weighted gather-sum)
        per_node = (nodes @ derived["w_nodes"]).view(-1, hh)  # row 4 v + r = C_r h_v
        if self._gathers():  # the same sum as gathers and one product (no embedding_bag backward)
            z = take(per_tree, actions.states.index) + actions.meta @ derived["meta_rows"]
            for role in range(MOVE_NODES):
                z = z + take(per_node, actions.nodes[:, role] * MOVE_NODES + role)
            return z
        table = torch.cat([per_node, per_tree, derived["meta_rows"]], dim=0)
        if plan is None or plan.rows is None:
            plan = self.plan(graphs, actions)
        return table, plan.rows, plan.weights

    def first_layer(self, nodes: Tensor, tree: Tensor, graphs: GraphBatch, actions: ActionBatch) -> Tensor:
        """Pre-activation of the head's first layer, ``W_1 [tree; action] + b_1``: ``[A, head_hidden]``."""
        z = self._first_layer(nodes, tree, graphs, actions)
        if isinstance(z, Tensor):
            return z
        table, rows, weights = z
        return F.embedding_bag(rows, table, per_sample_weights=weights, mode="sum")

    def head_rest(self, z: Tensor, generator: torch.Generator | None) -> Tensor:
        """The head after its first layer's pre-activation ``z`` ``[A, head_hidden]``: ``Q`` ``[A]``."""
        # in-place ReLUs: the producers (matmul, embedding_bag) do not keep their outputs for
        # backward, and [A, hidden] tensors are the largest of the update
        z = dropout(F.relu(z, inplace=True), self.cfg.dropout, self.training, generator)
        z = F.relu(self.head2(z), inplace=True)
        return self.head3(z).squeeze(-1)

    def head(
        self,
        nodes: Tensor,
        tree: Tensor,
        graphs: GraphBatch,
        actions: ActionBatch,
        generator: torch.Generator | None = None,
        chunk: int | None = None,
        plan: InputPlan | None = None,
    ) -> Tensor:
        """``Q`` per action ``[A]`` from node embeddings ``[N, h]`` and tree embeddings ``[G, 3h]``.
        ``chunk``: without autograd and in eval mode, run the per-action layers this many actions at a time
        (same values, cache-sized buffers)."""
        if actions.meta.shape[1] != self.cfg.action_meta:
            raise ValueError(
                f"actions have {actions.meta.shape[1]} metadata columns, the network "
                f"expects {self.cfg.action_meta}"
            )
        z = self._first_layer(nodes, tree, graphs, actions, plan)
        if isinstance(z, Tensor):
            return self.head_rest(z, generator)
        table, rows, weights = z
        n = rows.shape[0]
        if not chunk or chunk >= n or self.training or torch.is_grad_enabled():
            chunk = n

        def rest(i: int) -> Tensor:  # the head of actions i to i + chunk
            z = F.embedding_bag(
                rows[i : i + chunk], table, per_sample_weights=weights[i : i + chunk], mode="sum"
            )
            return self.head_rest(z, generator)

        return torch.cat([rest(i) for i in range(0, n, chunk)])

    def forward(
        self,
        graphs: GraphBatch,
        actions: ActionBatch,
        generator: torch.Generator | None = None,
        chunk: int | None = None,
        plan: InputPlan | None = None,
    ) -> Tensor:
        """``Q`` of every action in ``actions`` (on the trees in ``graphs``), float ``[A]``. ``generator``:
        dropout RNG; ``chunk``: see :meth:`head`; ``plan``: :meth:`plan` of this batch, when the caller shares
        it."""
        if actions.states.count != graphs.num_graphs:
            raise ValueError(
                f"actions are grouped into {actions.states.count} states but there are "
                f"{graphs.num_graphs} trees"
            )
        nodes, tree = self.encode(graphs, plan)
        return self.head(nodes, tree, graphs, actions, generator, chunk, plan)


def _encode(net: QNetwork, graphs: GraphBatch, slots: DenseSlots, derived: list) -> tuple[Tensor, Tensor]:
    """:meth:`QNetwork.encode` (``derived``: the GAT layers' :func:`gat_weights`)."""
    x = F.relu(net.node_encoder(graphs.x))
    gathers = net._gathers()
    for i, conv in enumerate(net.convs):
        x = F.relu(dense_gat(conv, x, slots, derived[i], gathers)) + x
    seg = graphs.nodes
    return x, torch.cat([segment_sum(x, seg), segment_mean(x, seg), segment_max(x, seg)], dim=1)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
