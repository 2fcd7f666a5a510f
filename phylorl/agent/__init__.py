"""Twin soft-Q learning: batching, losses, n-step returns, the learner core and action selection.

    from phylorl.agent import AgentConfig, Learner, Prefetcher, collate
    learner = Learner(NetworkConfig(), AgentConfig(), device)
    metrics, priorities = learner.step(collate(transitions, device, weights))

Names are imported lazily, so ``phylorl.agent.sumtree`` (used by the replay service) loads without
torch and torch-geometric.
"""

from importlib import import_module

_EXPORTS = {
    "policy_networks": "acting", "select_actions": "acting",
    "Batch": "batch", "Prefetcher": "batch", "collate": "batch",
    "AgentConfig": "config",
    "METRIC_NAMES": "learner", "Learner": "learner",
    "n_step_transitions": "nstep",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
