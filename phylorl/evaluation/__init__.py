"""Evaluation of search methods (the agent, classical searches) against IQ-TREE: pure computation.

:func:`evaluate_methods` runs the methods from common seeded start trees and returns an
:class:`Evaluation` (per start rows, per method summaries, a breakdown by taxon count);
:func:`write_plots` draws it. The ``phylorl eval`` command is a thin layer over these.

Names are imported lazily, so :mod:`.metrics` (scores and summaries, plain Python) loads without the
likelihood engine.
"""

from importlib import import_module

_EXPORTS = {
    "IqtreeError": "iqtree", "IqtreeResult": "iqtree", "IqtreeRunner": "iqtree", "find_iqtree": "iqtree",
    "AlignmentInfo": "methods", "Evaluation": "methods", "check_methods": "methods", "evaluate_methods": "methods",
    "AGENT_METHODS": "metrics", "METHODS": "metrics", "MIN_GAIN": "metrics", "TOLERANCE": "metrics",
    "MethodSummary": "metrics", "StartResult": "metrics", "by_taxon_count": "metrics", "improvement": "metrics",
    "mean_curve": "metrics", "normalised_trajectory": "metrics", "summarise": "metrics", "within": "metrics",
    "write_plots": "plots",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
