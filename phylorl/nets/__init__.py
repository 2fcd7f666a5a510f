"""Q networks over trees: GAT tree encoder, action encoder, Q head (reference PyG path + fast path).

    from phylorl.nets.config import NetworkConfig
    from phylorl.nets.inputs import collate_observations
    from phylorl.nets.qnet import QNetwork
    graphs, actions = collate_observations(observations)
    q = QNetwork(NetworkConfig())(graphs, actions)          # [total actions]

Random trees and observations for tests and benchmarks are in :mod:`phylorl.nets.synthetic`. The package imports
none of its modules, so that the configuration (:mod:`phylorl.nets.config`) is read without torch.
"""
