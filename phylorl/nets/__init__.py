"""Q networks over trees: GAT tree encoder, action encoder, Q head (reference PyG path + fast path).

    from phylorl.nets import NetworkConfig, QNetwork, collate_observations
    graphs, actions = collate_observations(observations)
    q = QNetwork(NetworkConfig())(graphs, actions)          # [total actions]

Random trees and observations for tests and benchmarks are in :mod:`phylorl.nets.synthetic`.
"""

from phylorl._lazy import exports

__getattr__, __dir__ = exports(__name__, {  # each imported on first use (see phylorl._lazy)
    "NetworkConfig": "config",
    **dict.fromkeys(("ActionBatch", "GraphBatch", "collate_actions", "collate_graphs", "collate_observations",
                     "move_to"), "inputs"),
    **dict.fromkeys(("QNetwork", "count_parameters"), "qnet"),
    "Segments": "segment",
})

__all__ = [
    "ActionBatch",
    "GraphBatch",
    "NetworkConfig",
    "QNetwork",
    "Segments",
    "collate_actions",
    "collate_graphs",
    "collate_observations",
    "count_parameters",
    "move_to",
]
