"""Twin soft-Q learning: losses, n-step returns, the learner core, acting and the search policy.

    from phylorl.agent.config import AgentConfig
    from phylorl.agent.learner import Learner
    from phylorl.records.collate import collate_records
    learner = Learner(NetworkConfig(), AgentConfig(), device)
    batch, _ = collate_records(records, weights)                # sampled transition records
    metrics, priorities = learner.step(batch)

The replay table's logic (sum tree, priority table, rate limiter) is :mod:`phylorl.replay`, which needs
neither torch nor numba. Device transfer is :mod:`phylorl.agent.transfer`, CUDA graph capture
:mod:`phylorl.agent.capture`. The package imports none of its modules, so that the configuration
(:mod:`phylorl.agent.config`) is read without torch.
"""
