"""TreeEnv: SPR moves on an unrooted tree, rewarded by the change in log-likelihood.

An episode starts from a tree for one alignment of the corpus (random, neighbour-joining or given)
with all branch lengths optimised. Each step applies one SPR move, optimises the branch lengths
around the regraft point, and pays ``ΔlogL / |logL(NJ)| × reward_scale``. Episodes end by time limit
only: ``truncated`` is set at the horizon and ``terminal`` is never set (the target must bootstrap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phylorl.phylo import (
    LikelihoodEngine,
    Tree,
    apply_spr,
    edges_near,
    enumerate_moves,
    parse_model,
    random_tree,
    read_newick,
)
from phylorl.phylo.parsimony_starts import parsimony_tree
from phylorl.types import Observation

from .config import EnvConfig
from .observation import AlignmentSignals, observe
from .prepare import PreparedAlignment


@dataclass
class EnvAlignment:
    """One corpus entry ready for episodes: the alignment, its preparation and its engine."""

    alignment: object
    prepared: PreparedAlignment
    engine: LikelihoodEngine
    name: str = ""
    signals: AlignmentSignals | None = None
    """Site patterns as Fitch sets and split supports (for the rich observation)."""

    def __post_init__(self):
        if self.signals is None:
            self.signals = AlignmentSignals.of(self.alignment, self.prepared.split_supports())

    @classmethod
    def build(cls, alignment, prepared: PreparedAlignment, name: str = "") -> EnvAlignment:
        return cls(alignment, prepared, LikelihoodEngine(alignment, parse_model(prepared.model)), name)


class TreeEnv:
    """One environment over a list of prepared alignments (see module docstring)."""

    def __init__(self, alignments: Sequence[EnvAlignment], config: EnvConfig = EnvConfig(), seed: int = 0):
        if not alignments:
            raise ValueError("TreeEnv needs at least one alignment")
        self.alignments = list(alignments)
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.tree: Tree | None = None
        self.current: EnvAlignment | None = None
        self.loglik = float("nan")
        self.start_loglik = float("nan")
        self.steps = 0
        self._moves = np.zeros((0, 4), dtype=np.int64)
        self._last: tuple[str, Observation] | None = None
        self._engine: tuple[EnvAlignment, LikelihoodEngine] | None = None  # this environment's own state

    @property
    def engine(self) -> LikelihoodEngine:
        """This environment's likelihood engine for the current alignment: its own, so that environments
        stepping on the same alignment do not overwrite each other's cached partials (the engine keeps
        the last tree it saw). Made when an episode starts on another alignment (same model)."""
        entry = self.current
        if self._engine is None or self._engine[0] is not entry:
            self._engine = (entry, LikelihoodEngine(entry.alignment, entry.engine.model or entry.engine.spec))
        return self._engine[1]

    # ------------------------------------------------------------- episodes
    def reset(self, alignment_index: int | None = None, tree: Tree | None = None) -> tuple[Observation, dict]:
        """Start an episode; ``tree`` is required when ``config.start == "given"``."""
        if alignment_index is None:
            alignment_index = int(self.rng.integers(len(self.alignments)))
        entry = self.alignments[alignment_index]
        self.current = entry
        if tree is not None:
            start = tree.copy()
        elif self.config.start == "random":
            start = random_tree(entry.alignment.taxa, self.rng, mean_length=self.config.random_start_length)
        elif self.config.start == "nj":
            start = read_newick(entry.prepared.nj_newick, entry.alignment)
        elif self.config.start == "parsimony":
            start = parsimony_tree(entry.alignment, self.rng, planes=entry.signals.planes)
        else:
            raise ValueError("start='given' needs a tree passed to reset()")
        self.tree = start
        self.loglik = self.engine.optimize_branch_lengths(start, rounds=self.config.start_rounds, tol=1e-3)
        self.start_loglik = self.loglik
        self.steps = 0
        self._moves = enumerate_moves(self.tree, radius=self.config.radius)
        self._last = None
        return self.observation(self.config.features), self._info(0.0)

    def step(self, action: int) -> tuple[Observation, float, bool, bool, dict]:
        """Apply move ``action`` (an index into the last observation's actions)."""
        delta = self.move(action)
        reward = delta / abs(self.current.prepared.nj_loglik) * self.config.reward_scale
        truncated = self.steps >= self.config.horizon
        obs = self.observation(self.config.features)
        return obs, float(reward), False, truncated, self._info(delta)

    def move(self, action: int) -> float:
        """Apply move ``action`` as :meth:`step` does and return the change of log-likelihood, without
        building the observation (searches that rank moves by other means skip its features;
        :meth:`observation` still builds it on demand)."""
        if self.tree is None:
            raise RuntimeError("call reset() before step()")
        if not 0 <= action < len(self._moves):
            raise IndexError(f"action {action} out of range: this state has {len(self._moves)} moves")
        new_loglik = self._apply(self.tree, self._moves[action])
        delta = new_loglik - self.loglik
        self.loglik, self.steps = new_loglik, self.steps + 1
        self._moves = enumerate_moves(self.tree, radius=self.config.radius)
        self._last = None  # the observation is stale
        return delta

    # -------------------------------------------------------------- helpers
    def _apply(self, tree: Tree, move) -> float:
        apply_spr(tree, move)
        edges = edges_near(tree, [int(move[0])], self.config.local_depth)
        return self.engine.optimize_branch_lengths(
            tree, edges, rounds=self.config.local_rounds, tol=1e-3, newton_tol=self.config.local_newton_tol
        )

    def observation(self, features: str | None = None) -> Observation:
        """The current state under a feature set (default: the environment's own); the last one
        built is reused until the tree changes (treat it as read-only)."""
        features = features or self.config.features
        if self._last is None or self._last[0] != features:
            obs = observe(self.tree, self._moves, features, self.current.signals, radius=self.config.radius)
            self._last = (features, obs)
        return self._last[1]

    def optimize_all_branches(self, rounds: int = 20, tol: float = 1e-4) -> float:
        """Optimise every branch length of the current tree (a move optimises only those near it);
        returns and records the new log-likelihood."""
        self.loglik = self.engine.optimize_branch_lengths(self.tree, rounds=rounds, tol=tol)
        self._last = None  # the lengths the observation shows have changed
        return self.loglik

    def _info(self, delta: float) -> dict:
        engine = self.engine
        return {
            "delta_loglik": float(delta),
            "loglik": float(self.loglik),
            "start_loglik": float(self.start_loglik),
            "evaluations": engine.n_evaluations,
            "branch_optimisations": engine.n_branch_optimisations,
            "alignment": self.current.name,
            "steps": self.steps,
        }

    @property
    def moves(self) -> np.ndarray:
        """The current state's SPR moves ``[A, 4]`` (rows are actions)."""
        return self._moves

    def evaluate_moves(self, indices=None) -> np.ndarray:
        """Log-likelihood each move (or each of the moves ``indices``) would reach, with the same
        local optimisation as ``step``.

        Leaves the environment's tree unchanged; costs one local optimisation per move.
        """
        base = self.tree
        moves = self._moves if indices is None else self._moves[np.asarray(indices, dtype=np.int64)]
        out = np.empty(len(moves))
        for i, move in enumerate(moves):
            out[i] = self._apply(base.copy(), move)
        return out

    def move_rewards(self) -> np.ndarray:
        """The reward each move of the current state would earn, exactly as :meth:`step` would pay
        it (float32 ``[A]``, rows of :attr:`moves`): the environment's own labels of its moves."""
        scale = self.config.reward_scale / abs(self.current.prepared.nj_loglik)
        return ((self.evaluate_moves() - self.loglik) * scale).astype(np.float32)
