"""The Q network as first designed, run with PyG's own layers on a :class:`~phylorl.nets.qnet.QNetwork`'s
parameters (a test oracle): ``GATConv`` over the edge list, PyG's pooling, the action encoder applied to each
action's input and the head's first layer to ``[tree; action]``. The product's network computes the same
function on a dense neighbour table with the first layer factored; tests hold the two equal."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.qnet import QNetwork

_LAYERS: dict = {}


def gat_layer(conv, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
    """PyG's ``GATConv`` of ``conv``'s shape (made once, on the meta device) run on ``conv``'s parameters
    (``torch.func.functional_call``: gradients reach them)."""
    from torch_geometric.nn import GATConv

    key = (conv.in_channels, conv.out_channels, conv.heads, conv.edge_dim, conv.add_self_loops)
    if key not in _LAYERS:
        with torch.device("meta"):
            _LAYERS[key] = GATConv(
                conv.in_channels,
                conv.out_channels,
                heads=conv.heads,
                concat=True,
                edge_dim=conv.edge_dim,
                add_self_loops=conv.add_self_loops,
            )
    return torch.func.functional_call(_LAYERS[key], dict(conv.named_parameters()), (x, edge_index, edge_attr))


def encode(net: QNetwork, graphs: GraphBatch) -> tuple[Tensor, Tensor]:
    """Node embeddings and tree embeddings (sum, mean, max pooling), PyG's way."""
    from torch_geometric.nn import global_add_pool, global_max_pool, global_mean_pool

    x = F.relu(net.node_encoder(graphs.x))
    for conv in net.convs:
        x = F.relu(gat_layer(conv, x, graphs.edge_index, graphs.edge_attr)) + x
    batch, size = graphs.nodes.index, graphs.nodes.count
    tree = torch.cat(
        [global_add_pool(x, batch, size), global_mean_pool(x, batch, size), global_max_pool(x, batch, size)],
        dim=1,
    )
    return x, tree


def q_values(
    net: QNetwork, graphs: GraphBatch, actions: ActionBatch, generator: torch.Generator | None = None
) -> Tensor:
    """``Q`` of every action, as first designed (``generator``: the dropout RNG in training mode)."""
    nodes, tree = encode(net, graphs)
    action = net.action_encoder(net.action_input(nodes, graphs, actions))
    z = net.head1(torch.cat([tree[actions.states.index], action], dim=1))
    return net.head_rest(z, generator)
