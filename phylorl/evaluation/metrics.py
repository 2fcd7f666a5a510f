"""How a search result is scored against IQ-TREE, and how scores are summarised (pure functions).

``improvement = (final − start) / (IQ-TREE − start)``: 0 for a method that keeps its start tree, 1 for
one that does as well as IQ-TREE from there. When IQ-TREE gains less than :data:`MIN_GAIN` over the
start tree the ratio is meaningless (a tiny or negative denominator); the improvement is then 1 if the
method ends within :data:`TOLERANCE` of IQ-TREE (``final >= IQ-TREE − TOLERANCE``) and 0 otherwise.
Without IQ-TREE every improvement is ``None`` and the summaries fall back on ``final − start``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

MIN_GAIN = 1.0
"""IQ-TREE must gain at least this much log-likelihood over a start tree for the ratio to be used."""
TOLERANCE = 0.1
"""A method is "at IQ-TREE" from a start when it ends at least ``IQ-TREE − TOLERANCE``."""

METHODS = ("agent", "agent+polish", "ml", "random", "greedy", "hillclimb", "iqtree")
"""Every method :func:`~phylorl.evaluation.methods.evaluate_methods` knows, in report order (the default)."""
AGENT_METHODS = ("agent", "agent+polish")
"""The methods that need a policy."""


def improvement(start: float, final: float, reference: float | None) -> float | None:
    """``(final − start) / (reference − start)``, or the 0/1 rule when ``reference − start < MIN_GAIN``
    (see module docstring); ``None`` without a reference."""
    if reference is None:
        return None
    gain = reference - start
    if gain < MIN_GAIN:
        return 1.0 if final >= reference - TOLERANCE else 0.0
    return (final - start) / gain


def within(final: float, reference: float | None) -> bool | None:
    """Whether ``final`` is at least ``reference − TOLERANCE`` (``None`` without a reference)."""
    return None if reference is None else bool(final >= reference - TOLERANCE)


@dataclass
class StartResult:
    """One method from one start tree of one alignment."""

    alignment: str
    n_taxa: int
    start: int
    """Index of the start tree (0..K-1); its seed is ``seed + start``."""
    method: str
    start_loglik: float
    final_loglik: float
    """The best log-likelihood seen (the method's answer)."""
    iqtree_loglik: float | None
    improvement: float | None
    within_tolerance: bool | None
    rf: int | None
    """Robinson–Foulds distance from the method's tree to IQ-TREE's (None without IQ-TREE)."""
    rf_normalised: float | None
    """``rf / (2 (n − 3))``: 0 same topology, 1 no split shared."""
    evaluations: int | None
    """Likelihood evaluations of the engine during the search (None for IQ-TREE)."""
    steps: int | None
    seconds: float
    trajectory: list[float] = field(default_factory=list)
    """Best log-likelihood seen after each move (empty for IQ-TREE)."""
    tree: str = ""
    """The method's tree (Newick)."""

    @property
    def delta(self) -> float:
        return self.final_loglik - self.start_loglik


@dataclass
class MethodSummary:
    """A method's scores over every start of every alignment (``None`` where undefined)."""

    method: str
    runs: int
    mean_improvement: float | None
    mean_best_of_k_improvement: float | None
    """Mean over alignments of the largest improvement among that alignment's K starts."""
    fraction_within_tolerance: float | None
    mean_delta_loglik: float
    """Mean of ``final − start`` (defined with or without IQ-TREE)."""
    mean_rf_normalised: float | None
    """Mean normalised Robinson–Foulds distance to IQ-TREE's tree."""
    mean_evaluations: float | None
    mean_seconds: float
    seconds_ratio_to_iqtree: float | None
    """``mean_seconds`` / IQ-TREE's mean wall seconds per alignment."""


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(sum(values) / len(values)) if values else None


def summarise(
    rows: Sequence[StartResult], methods: Sequence[str], iqtree_seconds: Sequence[float] | None = None
) -> list[MethodSummary]:
    """One :class:`MethodSummary` per method in ``methods`` (methods without rows are left out)."""
    iq_mean = _mean(iqtree_seconds or [])
    out = []
    for method in methods:
        mine = [r for r in rows if r.method == method]
        if not mine:
            continue
        by_alignment: dict[str, list[float]] = defaultdict(list)
        for r in mine:
            if r.improvement is not None:
                by_alignment[r.alignment].append(r.improvement)
        seconds = _mean(r.seconds for r in mine)
        out.append(
            MethodSummary(
                method=method,
                runs=len(mine),
                mean_improvement=_mean(r.improvement for r in mine),
                mean_best_of_k_improvement=_mean(max(v) for v in by_alignment.values()),
                fraction_within_tolerance=_mean(
                    None if r.within_tolerance is None else float(r.within_tolerance) for r in mine
                ),
                mean_delta_loglik=_mean(r.delta for r in mine),
                mean_rf_normalised=_mean(r.rf_normalised for r in mine),
                mean_evaluations=_mean(r.evaluations for r in mine),
                mean_seconds=seconds,
                seconds_ratio_to_iqtree=seconds / iq_mean if iq_mean else None,
            )
        )
    return out


def by_taxon_count(rows: Sequence[StartResult], methods: Sequence[str]) -> dict[int, dict[str, float | None]]:
    """``{n_taxa: {method: mean improvement}}`` (mean ``final − start`` when there is no IQ-TREE)."""
    table = {}
    for n in sorted({r.n_taxa for r in rows}):
        summaries = summarise([r for r in rows if r.n_taxa == n], methods)
        table[n] = {
            s.method: s.mean_delta_loglik if s.mean_improvement is None else s.mean_improvement
            for s in summaries
        }
    return table


BANDS = ((4, 29), (30, 99), (100, 199), (200, 499), (500, 999), (1000, None))
"""Taxa bands of :func:`by_band` (``None``: no upper bound)."""


def by_band(rows: Sequence[StartResult], methods: Sequence[str]) -> dict[str, dict[str, MethodSummary]]:
    """:func:`summarise` of each taxa band of :data:`BANDS` that holds rows: ``{band: {method: summary}}``,
    IQ-TREE's seconds those of the band's alignments."""
    table = {}
    for low, high in BANDS:
        mine = [r for r in rows if r.n_taxa >= low and (high is None or r.n_taxa <= high)]
        if mine:
            iq_seconds = [r.seconds for r in mine if r.method == "iqtree" and r.start == 0]
            table[f"{low}+" if high is None else f"{low}-{high}"] = {
                s.method: s for s in summarise(mine, methods, iq_seconds)
            }
    return table


def normalised_trajectory(row: StartResult) -> list[float]:
    """``row``'s best-so-far trajectory, each point scored as :func:`improvement` (or as ``ll − start``
    without a reference), starting with the start tree (step 0)."""
    points = [row.start_loglik, *row.trajectory]
    if row.iqtree_loglik is None:
        return [p - row.start_loglik for p in points]
    return [improvement(row.start_loglik, p, row.iqtree_loglik) for p in points]


def mean_curve(curves: Sequence[Sequence[float]]) -> list[float]:
    """Point-wise mean of ``curves``, each padded with its last value to the longest length (a search
    that stopped stays where it stopped)."""
    curves = [list(c) for c in curves if len(c)]
    if not curves:
        return []
    length = max(map(len, curves))
    padded = [c + [c[-1]] * (length - len(c)) for c in curves]
    return [math.fsum(col) / len(col) for col in zip(*padded)]
