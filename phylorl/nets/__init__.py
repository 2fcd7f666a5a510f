"""Q networks over trees: GAT tree encoder, action encoder, Q head.

    from phylorl.nets.config import NetworkConfig
    from phylorl.nets.qnet import QNetwork
    from phylorl.records.collate import collate_states
    graphs, actions, _ = collate_states(records)             # observation records (phylorl.records.codec)
    q = QNetwork(NetworkConfig())(graphs, actions)          # [total actions]

The package imports none of its modules, so that :mod:`phylorl.nets.config` is read without torch.
"""
