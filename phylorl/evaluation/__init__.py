"""Evaluation of search methods (the agent, classical searches) against IQ-TREE: pure computation.

:func:`evaluate_methods` runs the methods from common seeded start trees and returns an
:class:`Evaluation` (per start rows, per method summaries, a breakdown by taxon count);
:func:`write_plots` draws it (matplotlib is imported only when it draws). The ``phylorl eval`` command is a
thin layer over these.
"""

from .iqtree import IqtreeError, IqtreeResult, IqtreeRunner, find_iqtree
from .methods import AlignmentInfo, Evaluation, check_methods, evaluate_methods
from .metrics import (AGENT_METHODS, DEFAULT_METHODS, METHODS, MIN_GAIN, TOLERANCE, MethodSummary, StartResult,
                      by_taxon_count, improvement, mean_curve, normalised_trajectory, summarise, within)
from .plots import write_plots

__all__ = ["AGENT_METHODS", "DEFAULT_METHODS", "METHODS", "MIN_GAIN", "TOLERANCE", "AlignmentInfo", "Evaluation",
           "IqtreeError", "IqtreeResult", "IqtreeRunner", "MethodSummary", "StartResult", "by_taxon_count", "check_methods",
           "evaluate_methods", "find_iqtree", "improvement", "mean_curve", "normalised_trajectory", "summarise",
           "within", "write_plots"]
