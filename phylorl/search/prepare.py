"""What a search knows before its first move: the alignment's distinct sequences, the fitted model string.

:func:`fit_model_string` estimates the free parameters of a model string (``"GTR+F+G4"``) by maximum
likelihood on the neighbour-joining tree of the full alignment, exactly as the environment's preparation does
(:func:`phylorl.env.prepare.prepare_alignment`, without its bootstrap): the same string a reference program is
given, so that both sides optimise the same function.
"""

from __future__ import annotations

from collections.abc import Callable

from phylorl.phylo import LikelihoodEngine, nj_tree, parse_model


def fit_model_string(
    alignment, model: str = "GTR+F+G4", on_step: Callable[[dict], None] | None = None
) -> str:
    """``model`` with every free parameter estimated on the NJ tree of ``alignment`` (fully specified strings
    are returned as given, in canonical form).

    ``on_step`` is told ``{"step": "nj"}`` once the NJ tree is built and ``{"step": "model", "round": k,
    "loglik": ...}`` after each round of the fit (round 0: the NJ tree's branch lengths under the starting
    parameters)."""
    spec = parse_model(model)
    if not spec.free_parameters:
        return str(spec)
    report = on_step or (lambda step: None)
    tree = nj_tree(alignment)
    report({"step": "nj"})
    engine = LikelihoodEngine(alignment, spec)
    engine.fit_model(tree, on_round=lambda k, loglik: report({"step": "model", "round": k, "loglik": loglik}))
    return str(engine.model.spec)
