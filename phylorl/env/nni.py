"""NNI rounds: several independent improving NNIs applied at once, as IQ-TREE's fast NNI search does.

An NNI is an SPR move of distance 1 (:mod:`phylorl.phylo.spr`): ``p`` is pruned with its ``s``-subtree and
regrafted on an edge ``(x, y)`` with ``x`` one of ``p``'s other neighbours ``a``, ``b``. It rewrites the rows of
``p``, ``a``, ``b`` and ``y`` only, so NNIs whose sets ``{p, a, b, y}`` are disjoint can be applied one after the
other in any order, each as it was scored. A climb that takes one move per step pays a step (screen, score,
evaluate) for each of them; a round takes them all:

1. every NNI of the tree is scored lazily (:meth:`~phylorl.phylo.LikelihoodEngine.spr_scores`, one compiled pass);
2. those scoring above the current log-likelihood are taken best first, skipping any that shares a node with
   one already taken, and evaluated fully (SPR + local branch optimisation, as a step);
3. the improving ones are applied together and the branches near each optimised; the round keeps that tree
   when it beats the best single NNI's evaluation, and makes the best single NNI otherwise.
"""

from __future__ import annotations

import numpy as np

from phylorl.phylo import apply_spr, edges_near, move_metadata

from .tree_env import TreeEnv

EPS = 1e-6


def independent(tree, moves: np.ndarray) -> list[int]:
    """Indices into ``moves`` (NNIs, best first) of those sharing no rewritten node with an earlier one."""
    taken: list[int] = []
    used: set[int] = set()
    for i, (p, s, _, y) in enumerate(moves):
        nodes = {int(p), int(y), *(int(v) for v in tree.neighbors[p] if v != s)}
        if nodes.isdisjoint(used):
            used |= nodes
            taken.append(i)
    return taken


def nni_round(env: TreeEnv) -> int:
    """One NNI round on ``env``'s tree (see the module docstring); returns how many NNIs it applied (0 when no NNI
    improves the log-likelihood, and the tree is then unchanged)."""
    moves = env.moves
    if not len(moves):
        return 0
    nni = np.flatnonzero(move_metadata(env.tree, moves)[:, 2] == 2)  # the distance column holds d(p, x) + 1
    if not len(nni):
        return 0
    lazy = env.engine.spr_scores(env.tree, moves[nni])
    order = np.argsort(-lazy, kind="stable")
    promising = nni[order[lazy[order] > env.loglik + EPS]]
    if not len(promising):
        return 0
    chosen = promising[independent(env.tree, moves[promising])]
    values = env.evaluate_moves(chosen)
    improving = chosen[values > env.loglik + EPS]
    if not len(improving):
        return 0
    best = int(chosen[int(np.argmax(values))])
    if len(improving) > 1:
        tree = env.tree.copy()
        for move in moves[improving]:
            apply_spr(tree, move)
        cfg = env.config
        edges = edges_near(tree, [int(m[0]) for m in moves[improving]], cfg.local_depth)
        together = env.engine.optimize_branch_lengths(tree, edges, rounds=cfg.local_rounds, tol=1e-3,
                                                      newton_tol=cfg.local_newton_tol)
        if together > float(values.max()) + EPS:
            env.replace(tree, together)
            return len(improving)
    env.move(best)
    return 1
