"""Settings of a tree-search environment (:class:`EnvConfig`): numpy-free, so that a service reads its
configuration without the likelihood engine, numba and scipy."""

from __future__ import annotations

from dataclasses import dataclass

from phylorl.types import FEATURE_SETS

DRAWN_STARTS = ("random", "nj", "parsimony")
"""The start trees an environment draws by itself (every kind but ``given``)."""
START_KINDS = (*DRAWN_STARTS, "given")


@dataclass(frozen=True)
class EnvConfig:
    """Settings of a tree-search environment."""

    horizon: int = 20
    """Steps per episode; the last one is marked ``truncated`` (never ``terminal``)."""
    start: str = "random"
    """Start tree: ``random`` (uniform random addition), ``nj`` (neighbour joining), ``parsimony``
    (randomised stepwise-addition parsimony improved by parsimony SPR, drawn with the environment's
    generator) or ``given``."""
    reward_scale: float = 100.0
    """Reward = ΔlogL / |logL(NJ tree)| × reward_scale."""
    radius: int | None = None
    """Largest number of edges between the pruned node and the regraft edge; None = all moves."""
    local_depth: int = 1
    """Branches optimised after a move: those within this many edges of the regrafted node."""
    local_rounds: int = 2
    """Passes of Newton–Raphson over those branches."""
    local_newton_tol: float = 1e-4
    """Relative change of a branch length that ends its Newton iterations after a move (log-likelihoods
    agree with a 1e-7 tolerance to about 1e-5; full optimisations use 1e-7)."""
    random_start_length: float = 0.1
    """Mean branch length of random start trees before optimisation."""
    start_rounds: int = 8
    """Passes of full branch-length optimisation on the start tree."""
    features: str = "rich"
    """What observations hold (:mod:`phylorl.records.features`): ``rich`` (normalised geometry and each
    move's parsimony change) or ``basic`` (is_leaf, raw branch lengths, 3 numbers per move)."""

    def __post_init__(self):
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")
        if self.start not in START_KINDS:
            raise ValueError(f"start must be one of {START_KINDS}, got {self.start!r}")
        if self.radius is not None and self.radius < 1:
            raise ValueError(f"radius must be >= 1 or None, got {self.radius}")
        if self.local_depth < 1 or self.local_rounds < 1:
            raise ValueError("local_depth and local_rounds must be >= 1")
        if self.features not in FEATURE_SETS:
            raise ValueError(f"features must be one of {FEATURE_SETS}, got {self.features!r}")
