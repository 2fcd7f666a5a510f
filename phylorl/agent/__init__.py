"""Twin soft-Q learning: batching, losses, n-step returns, the learner core and action selection.

    from phylorl.agent.batch import collate
    from phylorl.agent.config import AgentConfig
    from phylorl.agent.learner import Learner
    learner = Learner(NetworkConfig(), AgentConfig(), device)
    metrics, priorities = learner.step(collate(transitions, device, weights))

The replay table's logic (sum tree, priority table, rate limiter) is :mod:`phylorl.replay`, which needs
neither torch nor numba. The package imports none of its modules, so that the configuration
(:mod:`phylorl.agent.config`) is read without torch.
"""
