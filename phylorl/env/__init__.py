"""Tree-search environments: per-alignment preparation, observations built from trees, TreeEnv and VecTreeEnv.

The observation and transition types themselves live in :mod:`phylorl.types` (numpy only), so the
replay service and the wire codecs use them without loading the likelihood engine; they are
re-exported here for the environments' users.
"""

from phylorl._lazy import exports
from phylorl.types import MoveSource, Observation, Transition

__getattr__, __dir__ = exports(__name__, {  # each imported on first use (see phylorl._lazy)
    **dict.fromkeys(("PreparationCache", "PreparedAlignment", "prepare_alignment"), "prepare"),
    **dict.fromkeys(("EnvAlignment", "TreeEnv"), "tree_env"),
    "EnvConfig": "config",
    **dict.fromkeys(("build_observation", "observation_from_tree"), "tree_observation"),
    **dict.fromkeys(("VecStep", "VecTreeEnv"), "vec_env"),
})

__all__ = ["EnvAlignment", "EnvConfig", "MoveSource", "Observation", "PreparationCache", "PreparedAlignment",
           "Transition", "TreeEnv", "VecStep", "VecTreeEnv", "build_observation", "observation_from_tree",
           "prepare_alignment"]
