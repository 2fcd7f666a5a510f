"""Evaluation of search methods (the agent, classical searches) against IQ-TREE: pure computation.

:func:`~phylorl.evaluation.methods.evaluate_methods` runs the methods from common seeded start trees and
returns an :class:`~phylorl.evaluation.methods.Evaluation` (per start rows, per method summaries, a breakdown
by taxon count); :func:`~phylorl.evaluation.plots.write_plots` draws it (matplotlib is imported only when it
draws); :mod:`~phylorl.evaluation.metrics` scores and summarises (pure functions);
:mod:`~phylorl.evaluation.iqtree` runs IQ-TREE. The ``phylorl eval`` command is a thin layer over these. The
package itself imports none of them: the command line's help reads :mod:`~phylorl.evaluation.metrics` alone,
without the likelihood engine, numba and scipy the others load (``phylorl --help``: 0.2 s instead of 1.8).
"""
