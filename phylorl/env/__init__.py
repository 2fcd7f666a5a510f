"""Tree-search environments: observations, per-alignment preparation, TreeEnv and VecTreeEnv.

Names are imported lazily, so ``phylorl.env.observation`` (the wire contract, needed by the replay
service) loads without the likelihood engine and its numba/scipy start-up cost.
"""

from importlib import import_module

_EXPORTS = {
    "MoveSource": "observation", "Observation": "observation", "Transition": "observation",
    "PreparationCache": "prepare", "PreparedAlignment": "prepare", "prepare_alignment": "prepare",
    "EnvAlignment": "tree_env", "EnvConfig": "tree_env", "TreeEnv": "tree_env",
    "build_observation": "tree_observation", "observation_from_tree": "tree_observation",
    "VecStep": "vec_env", "VecTreeEnv": "vec_env",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
