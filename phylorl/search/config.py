"""The large-scale search's settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass

STARTS = ("parsimony", "nj")
TAXA_PER_FAIL = 7
"""Taxa per failed perturbation allowed before the search stops: a perturbation of a quarter of the taxa finds
a better local optimum less often on a larger tree, so a larger tree gets more tries (chosen on ``train/``;
figures in ``docs/benchmarks.md``)."""


@dataclass(frozen=True)
class SearchConfig:
    """How :func:`phylorl.search.search` searches (defaults: the settings measured best on ``train/``)."""

    start: str = "nj"
    """First start tree: ``"parsimony"`` (randomised stepwise addition + parsimony SPR, seeded) or
    ``"nj"``."""
    starts: int = 8
    """Start trees climbed with fast rounds (the first as :attr:`start` says, the others parsimony trees); the
    best of them goes on to the slow rounds."""
    parsimony_radius: int = 6
    """Radius of the parsimony SPR rounds that polish each parsimony tree."""
    radius_step: int = 5
    """Width of a radius window: the fast rounds widen ``[1, 5] -> [6, 10] -> ...`` while that pays, the slow
    rounds shift theirs outward when a round gains nothing (RAxML-NG's radius detection)."""
    fast_gain: float = 1.0
    """Fast rounds (lazy scores with fixed lengths) repeat while a round gains more than this (in the search's
    schedule and in each perturb-and-climb iteration)."""
    auto_gain: float = 0.1
    """A wider fast radius window is tried while the last one gained more than this."""
    slow_branches: int = 3
    """Branches optimised in a slow round's lazy scores (1: the pendant; 3: the pendant and the regraft
    halves)."""
    subtree_cutoff: float = 1.0
    """A round's walk stops behind a regraft whose score falls below the tree by more than this times the mean
    fall so far (RAxML-NG's subtree cutoff); 0: every regraft within the radius is scored."""
    slow_near: float = 1.0
    """In slow rounds, a subtree's best regraft whose lazy score falls short of the tree by less than this is
    tried with the branches around it optimised (:func:`~phylorl.search.rounds.spr_round`'s ``near``)."""
    slow_gain: float = 0.1
    """A slow round gaining more than this restarts the slow radius windows at ``[1, radius_step]``; in a
    perturb-and-climb iteration, slow rounds repeat while a round gains more than this."""
    slow_radius_limit: int = 15
    """The slow rounds stop when their window would start beyond this distance."""
    branch_rounds: int = 3
    """Newton passes over every branch after each round."""
    perturb_fails: int = 10
    """Perturb-and-climb iterations end after :meth:`fails_allowed` in a row find no better tree: at least
    this many (0: no perturbation)."""
    perturb_fails_max: int = 20
    """At most this many failures in a row end the perturbations (one more per :data:`TAXA_PER_FAIL` taxa in
    between)."""
    perturb_moves: float = 0.25
    """Random SPR moves of a perturbation, as a fraction of the taxa (at least :attr:`perturb_min_moves`)."""
    perturb_min_moves: int = 3
    perturb_radius: int = 3
    """Largest distance of a perturbation's moves."""
    climb_rounds: int = 10
    """At most this many fast, then slow, rounds per climb after a perturbation."""
    climb_radius: int = 5
    """Largest regraft distance in a climb (at most the fast radius)."""
    threads: int = 1
    """Processes the search runs its climbs in: the start trees are climbed at once (to the same result as one
    after another), and each round of the perturbation phase is a batch of this many perturb-and-climb
    iterations from the same best tree, so the answer depends on it (the same seed and threads give the same
    tree)."""
    max_rounds: int | None = None
    """Stop after this many rounds (a batch of perturb-and-climb iterations counts as one; with ``threads``
    above one, the start trees' climbs are one step however many rounds they take); ``None``: when the
    schedule ends."""

    def __post_init__(self) -> None:
        if self.start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}, got {self.start!r}")
        if self.starts < 1 or self.radius_step < 1 or self.slow_radius_limit < 1 or self.threads < 1:
            raise ValueError("starts, radius_step, slow_radius_limit and threads must be >= 1")
        if self.perturb_fails_max < self.perturb_fails:
            raise ValueError("perturb_fails_max must be >= perturb_fails")
        if self.perturb_fails < 0 or self.perturb_min_moves < 1 or self.perturb_radius < 1:
            raise ValueError("perturb_fails, perturb_min_moves and perturb_radius out of range")
        if self.slow_branches not in (1, 3):
            raise ValueError(f"slow_branches must be 1 or 3, got {self.slow_branches}")

    def fails_allowed(self, n_taxa: int) -> int:
        """Failed perturb-and-climb iterations in a row that end the perturbations of a tree of ``n_taxa``."""
        if not self.perturb_fails:
            return 0
        return max(self.perturb_fails, min(self.perturb_fails_max, n_taxa // TAXA_PER_FAIL))

    def to_dict(self) -> dict:
        return asdict(self)
