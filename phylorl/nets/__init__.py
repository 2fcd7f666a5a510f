"""Q networks over trees: GAT tree encoder, action encoder, Q head (reference PyG path + fast path).

    from phylorl.nets import NetworkConfig, QNetwork, collate_observations
    graphs, actions = collate_observations(observations)
    q = QNetwork(NetworkConfig())(graphs, actions)          # [total actions]

Random trees and observations for tests and benchmarks are in :mod:`phylorl.nets.synthetic`.
"""

from .config import NetworkConfig
from .inputs import ActionBatch, GraphBatch, collate_actions, collate_graphs, collate_observations, move_to
from .qnet import QNetwork, count_parameters
from .segment import Segments

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
