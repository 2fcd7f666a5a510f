"""Twin soft-Q learning: batching, losses, n-step returns, the learner core and action selection.

    from phylorl.agent import AgentConfig, Learner, Prefetcher, collate
    learner = Learner(NetworkConfig(), AgentConfig(), device)
    metrics, priorities = learner.step(collate(transitions, device, weights))

The replay table's logic (sum tree, priority table, rate limiter) is :mod:`phylorl.replay`, which needs
neither torch nor numba.
"""

from .acting import policy_networks, select_actions
from .batch import Batch, Prefetcher, collate
from .config import AgentConfig
from .learner import METRIC_NAMES, Learner
from .nstep import n_step_transitions

__all__ = ["METRIC_NAMES", "AgentConfig", "Batch", "Learner", "Prefetcher", "collate", "n_step_transitions",
           "policy_networks", "select_actions"]
