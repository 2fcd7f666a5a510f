"""What a search knows before its first move: the alignment's distinct sequences, the fitted model string.

:func:`fit_model_string` estimates the free parameters of a model string (``"GTR+F+G4"``) by maximum
likelihood on the neighbour-joining tree of the full alignment, exactly as the environment's preparation does
(:func:`phylorl.env.prepare.prepare_alignment`, without its bootstrap): the same string a reference program is
given, so that both sides optimise the same function.
"""

from __future__ import annotations

from phylorl.phylo import LikelihoodEngine, nj_tree, parse_model


def fit_model_string(alignment, model: str = "GTR+F+G4") -> str:
    """``model`` with every free parameter estimated on the NJ tree of ``alignment`` (fully specified strings
    are returned as given, in canonical form)."""
    spec = parse_model(model)
    if not spec.free_parameters:
        return str(spec)
    engine = LikelihoodEngine(alignment, spec)
    engine.loglik(nj_tree(alignment))  # estimates the free parameters on this topology
    return str(engine.model.spec)
