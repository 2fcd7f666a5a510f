"""Twin soft-Q learning: batching, losses, n-step returns, the learner core and action selection.

    from phylorl.agent import AgentConfig, Learner, Prefetcher, collate
    learner = Learner(NetworkConfig(), AgentConfig(), device)
    metrics, priorities = learner.step(collate(transitions, device, weights))

The replay table's logic (sum tree, priority table, rate limiter) is :mod:`phylorl.replay`, which needs
neither torch nor numba.
"""

from phylorl._lazy import exports

__getattr__, __dir__ = exports(__name__, {  # each imported on first use (see phylorl._lazy)
    **dict.fromkeys(("policy_networks", "select_actions"), "acting"),
    **dict.fromkeys(("Batch", "Prefetcher", "collate"), "batch"),
    "AgentConfig": "config",
    **dict.fromkeys(("METRIC_NAMES", "Learner"), "learner"),
    "n_step_transitions": "nstep",
})

__all__ = ["METRIC_NAMES", "AgentConfig", "Batch", "Learner", "Prefetcher", "collate", "n_step_transitions",
           "policy_networks", "select_actions"]
