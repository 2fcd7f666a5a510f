"""Maximum-likelihood tree search at real size (30-1,000 taxa): parsimony starts, lazy SPR rounds.

    from phylorl.search import search
    result = search(alignment, "GTR+F+G4", seed=1)
    result.tree, result.loglik

Modules: :mod:`~phylorl.search.search` (the call), :mod:`~phylorl.search.strategy` (the round schedule),
:mod:`~phylorl.search.rounds` (one SPR round), :mod:`~phylorl.search.perturb` (perturb-and-climb iterations),
:mod:`~phylorl.search.state` (state between rounds, checkpoints), :mod:`~phylorl.search.workers` (the climbs
run at once in processes), :mod:`~phylorl.search.prepare` (the model string), :mod:`~phylorl.search.config`
(settings).
"""

from .config import SearchConfig
from .search import SearchResult, search

__all__ = ["SearchConfig", "SearchResult", "search"]
