"""Tree-search environments: per-alignment preparation, observations built from trees, TreeEnv and VecTreeEnv.

The observation and transition types themselves live in :mod:`phylorl.types` (numpy only), so the
replay service and the wire codecs use them without loading the likelihood engine; they are
re-exported here for the environments' users.
"""

from phylorl.types import MoveSource, Observation, Transition

from .prepare import PreparationCache, PreparedAlignment, prepare_alignment
from .tree_env import EnvAlignment, EnvConfig, TreeEnv
from .tree_observation import build_observation, observation_from_tree
from .vec_env import VecStep, VecTreeEnv

__all__ = ["EnvAlignment", "EnvConfig", "MoveSource", "Observation", "PreparationCache", "PreparedAlignment",
           "Transition", "TreeEnv", "VecStep", "VecTreeEnv", "build_observation", "observation_from_tree",
           "prepare_alignment"]
