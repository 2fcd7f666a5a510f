"""Tree-search environments: observations, per-alignment preparation, TreeEnv and VecTreeEnv."""

from .observation import Observation, Transition
from .prepare import PreparationCache, PreparedAlignment, prepare_alignment
from .tree_env import EnvAlignment, EnvConfig, TreeEnv, build_observation
from .vec_env import VecStep, VecTreeEnv

__all__ = [
    "Observation", "Transition", "PreparationCache", "PreparedAlignment", "prepare_alignment",
    "EnvAlignment", "EnvConfig", "TreeEnv", "build_observation", "VecStep", "VecTreeEnv",
]
