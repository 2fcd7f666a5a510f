"""The likelihood engine: Felsenstein pruning with cached partials per directed edge.

``LikelihoodEngine(alignment, model).loglik(tree)`` evaluates a tree. The engine remembers the last
tree it saw (a snapshot of its edge and length arrays); on the next call it compares the arrays and
recomputes only the partials that the differences invalidate, so evaluating a tree after an SPR move
or a branch-length change costs a few node updates instead of a full traversal.

Free model parameters (``GTR+F+G4`` without numbers) are estimated by maximum likelihood on the first
tree the engine sees and then held fixed; :attr:`LikelihoodEngine.model` shows their values.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import branch_kernels as bk
from . import kernels as kn
from . import lazy_spr, spr
from .models import ModelSpec, SubstitutionModel, build_model, parse_model
from .tree import Tree, edge_walk

BRLEN_MIN = 1e-6  # IQ-TREE's minimum branch length
BRLEN_MAX = 100.0


class Buffers(NamedTuple):
    """The engine's work arrays for one tree size (``E`` edges, ``C`` rate categories, ``P`` patterns), handed
    to the compiled kernels as one argument."""

    clv: np.ndarray  # float64 [3(n-2), C, 4, P]  partials of the directed edges with internal heads
    scale: np.ndarray  # int32 [3(n-2), P]          their scaling exponents (kernels.clv_index)
    valid: np.ndarray  # bool [2E]              which partials are current
    pmat: np.ndarray  # float64 [E, C, 4, 4]   transition matrices per edge and category
    tip_pmat: np.ndarray  # float64 [E, C, 4, 16]  the same applied to every tip state mask
    stack: np.ndarray  # int64 [4E + 8]         traversal stack
    site: np.ndarray  # float64 [P]            site likelihoods at the evaluation edge
    site_scale: np.ndarray  # int64 [P]              and their scaling exponents
    coef: np.ndarray  # float64 [C, 4, P]      one branch's likelihood coefficients (Newton)
    inv_scaled: np.ndarray  # float64 [P]            the invariant-site term on their scale

    @classmethod
    def allocate(cls, n_edges: int, n_cats: int, n_patterns: int) -> Buffers:
        E, C, P = n_edges, n_cats, n_patterns
        rows = 3 * (E - 1) // 2  # three per internal node
        return cls(
            np.zeros((rows, C, 4, P)),
            np.zeros((rows, P), dtype=np.int32),
            np.zeros(2 * E, dtype=np.bool_),
            np.zeros((E, C, 4, 4)),
            np.zeros((E, C, 4, 16)),
            np.zeros(4 * E + 8, dtype=np.int64),
            np.zeros(P),
            np.zeros(P, dtype=np.int64),
            np.zeros((C, 4, P)),
            np.zeros(P),
        )


class ModelArrays(NamedTuple):
    """A substitution model as the kernels read it."""

    freqs: np.ndarray  # float64 [4]
    weights: np.ndarray  # float64 [C] category weights
    eigvals: np.ndarray  # float64 [4]
    U: np.ndarray  # float64 [4, 4] eigenvectors
    U_inv: np.ndarray  # float64 [4, 4]
    rates: np.ndarray  # float64 [C] category rates
    inv_lik: np.ndarray  # float64 [P] likelihood of each pattern if the site is invariant
    pinv: float  # proportion of invariant sites


class LikelihoodEngine:
    """Log-likelihood of unrooted trees for one alignment under one substitution model.

    Args:
        alignment: an :class:`~phylorl.phylo.alignment.Alignment`; its leaves are the tree's leaves
            in the same order.
        model: a model string (``"GTR{...}+F+G4{0.5}"``), a parsed :class:`ModelSpec` or a built
            :class:`SubstitutionModel`. Free parameters are estimated on the first tree evaluated.
        brlen_min, brlen_max: bounds of optimised branch lengths.

    Counters: ``n_evaluations`` (log-likelihood evaluations asked for), ``n_partial_updates``
    (node partials recomputed), ``n_branch_optimisations`` (single-branch Newton runs), ``n_lazy_scores``
    (SPR moves scored by :meth:`spr_scores`).
    """

    def __init__(self, alignment, model, *, brlen_min: float = BRLEN_MIN, brlen_max: float = BRLEN_MAX):
        self.alignment = alignment
        patterns = alignment.patterns()
        self.tip_codes = np.ascontiguousarray(patterns.codes, dtype=np.uint8)
        self.pattern_weights = np.ascontiguousarray(patterns.weights, dtype=np.float64)
        self.n_patterns = int(self.pattern_weights.shape[0])
        self._common = np.bitwise_and.reduce(self.tip_codes, axis=0)
        self.brlen_min, self.brlen_max = float(brlen_min), float(brlen_max)
        self.n_evaluations = self.n_partial_updates = self.n_branch_optimisations = self.n_lazy_scores = 0
        self._snap_edges = self._snap_lengths = None  # the last tree's edges and lengths (np.ndarray)
        self._root_edge = 0
        self._lazy_work: lazy_spr.LazyWork | None = None  # lazy scores' work space, kept between calls
        self._seen_taxa: tuple | None = None
        self._b: Buffers | None = None
        self.model: SubstitutionModel | None = None
        if isinstance(model, str):
            model = parse_model(model)
        if isinstance(model, SubstitutionModel):
            self.spec = model.spec
            self.set_model(model)
        elif isinstance(model, ModelSpec):
            self.spec = model
            if not model.free_parameters:
                emp = self.alignment.empirical_frequencies() if model.freqs == "empirical" else None
                self.set_model(build_model(model, emp))
        else:
            raise TypeError(
                f"model must be a string, ModelSpec or SubstitutionModel, got {type(model).__name__}"
            )

    # ------------------------------------------------------------------ model
    def set_model(self, model: SubstitutionModel) -> None:
        """Use ``model`` from now on (every cached partial becomes stale)."""
        self.model = model
        arrays = [model.freqs, model.weights, model.eigvals, model.U, model.U_inv, model.rates]
        arrays = [np.ascontiguousarray(a, dtype=np.float64) for a in arrays]
        # likelihood of each pattern if the site is invariant: sum_i pi_i * [state i fits every taxon]
        self._m = ModelArrays(*arrays, kn.MASK_VECTORS[self._common] @ arrays[0], float(model.pinv))
        self._n_cats = int(model.rates.shape[0])
        self._snap_edges = None  # forces a full recomputation

    def constant_patterns(self) -> np.ndarray:
        """``bool [n_patterns]``: patterns that one state can explain at every taxon."""
        return self._common != 0

    def fit_model(self, tree: Tree, on_round=None) -> float:
        """Estimate the free parameters of the model string on ``tree``; returns the log-likelihood.
        ``on_round(k, loglik)`` is told each round of the fit (:func:`~phylorl.phylo.model_fit.fit_model`)."""
        from .model_fit import fit_model

        model, ll = fit_model(self, tree, self.spec, on_round=on_round)
        self.set_model(model)
        return ll

    # ------------------------------------------------------------ bookkeeping
    def _check_tree(self, tree: Tree) -> None:
        if tree.n_leaves != self.tip_codes.shape[0]:
            raise ValueError(
                f"tree has {tree.n_leaves} leaves but the alignment has {self.tip_codes.shape[0]} taxa"
            )
        if tree.taxa != tuple(self.alignment.taxa):
            raise ValueError("tree leaves are not the alignment's taxa in alignment order")

    def _sync(self, tree: Tree) -> None:
        """Bring the cached partials in line with ``tree`` (only what changed is invalidated)."""
        if self.model is None:
            self._check_tree(tree)
            self.fit_model(tree)
        if tree.taxa is not self._seen_taxa:  # cheap identity test; the full check only for a new tuple
            self._check_tree(tree)
            self._seen_taxa = tree.taxa
        b, m = self._b, self._m
        if self._snap_edges is None:  # the tree's size is the alignment's (checked above)
            if b is None or b.clv.shape[1] != self._n_cats:
                b = self._b = Buffers.allocate(tree.n_edges, self._n_cats, self.n_patterns)
            b.valid[:] = False
            kn.compute_pmats(np.arange(tree.n_edges, dtype=np.int64), tree.lengths, m, b, kn.MASK_VECTORS)
            self._snap_edges = tree.edges.copy()
            self._snap_lengths = tree.lengths.copy()
            return
        first = kn.sync_tree(
            self._arrays(tree), tree.lengths, self._snap_edges, self._snap_lengths, b, m, kn.MASK_VECTORS
        )
        if first >= 0:
            self._root_edge = int(first)

    def _arrays(self, tree: Tree) -> tuple:
        """The kernels' ``tree`` bundle (:mod:`~phylorl.phylo.kernels`)."""
        return tree.neighbors, tree.node_edges, tree.edges, tree.n_leaves, self.tip_codes

    def _loglik_at(self, tree: Tree, e: int) -> float:
        b, m, arrays = self._b, self._m, self._arrays(tree)
        for d in (2 * e, 2 * e + 1):
            self.n_partial_updates += kn.ensure_valid(d, arrays, b)
        kn.edge_site_likelihoods(e, arrays, b, m)
        return float(kn.total_loglik(b.site, b.site_scale, self.pattern_weights, m.inv_lik, m.pinv))

    # ----------------------------------------------------------------- public
    def loglik(self, tree: Tree) -> float:
        """Log-likelihood of ``tree`` (incremental with respect to the last tree evaluated)."""
        self._sync(tree)
        self.n_evaluations += 1
        return self._loglik_at(tree, self._root_edge)

    def site_logliks(self, tree: Tree) -> np.ndarray:
        """Log-likelihood of every alignment site (``float64 [n_sites]``)."""
        self._sync(tree)
        self._loglik_at(tree, self._root_edge)
        lv = np.log(self._b.site) - self._b.site_scale * kn.LOG_SCALE
        if self._m.pinv > 0:
            with np.errstate(divide="ignore"):
                li = np.log(self._m.pinv * self._m.inv_lik)
            lv = np.logaddexp(lv, li)
        return lv[self.alignment.patterns().site_pattern]

    def optimize_branch_lengths(
        self,
        tree: Tree,
        edges=None,
        *,
        rounds: int = 8,
        tol: float = 1e-4,
        newton_iterations: int = 32,
        newton_tol: float = 1e-7,
    ) -> float:
        """Optimise branch lengths in place by per-branch Newton–Raphson; returns the log-likelihood.

        Args:
            tree: the tree; ``tree.lengths`` is updated in place.
            edges: edge ids to optimise (a local set around a move, say); ``None`` means all edges.
            rounds: at most this many passes over the edges.
            tol: stop when a pass raises the log-likelihood by less than this.
            newton_iterations: Newton iterations per branch and pass.
            newton_tol: relative change of a branch length that ends its Newton iterations.
        """
        self._sync(tree)
        # a local set is walked from its own first edge so the result does not depend on history
        order = edge_walk(tree, edges, start=self._root_edge if edges is None else None)
        if order.size == 0:
            return self.loglik(tree)
        newton = (newton_iterations, newton_tol, self.brlen_min, self.brlen_max)
        arrays = (self._arrays(tree), tree.lengths, self._snap_lengths, self.pattern_weights, self._b)
        loglik, n_updates, n_branches, last = bk.optimize_edges(order, rounds, tol, newton, *arrays, self._m)
        self.n_partial_updates += n_updates
        self.n_branch_optimisations += n_branches
        self.n_evaluations += 1
        self._root_edge = int(last)
        return float(loglik)

    def spr_scores(
        self,
        tree: Tree,
        moves: np.ndarray,
        *,
        branches: int = 3,
        newton_iterations: int = 32,
        newton_tol: float = 1e-7,
    ) -> np.ndarray:
        """Lazy score of each SPR move ``(p, s, x, y)`` of ``tree`` (:mod:`phylorl.phylo.lazy_spr`): the
        log-likelihood after the move with only the branches at the regraft point optimised, one Newton pass
        (``branches=3``: the pendant ``(p, s)``, then the two halves of ``(x, y)``; ``branches=1``: the
        pendant alone; ``branches=0``: none), the others as :func:`~phylorl.phylo.spr.apply_spr` leaves them.
        ``tree`` is unchanged. Moves sharing ``(p, s)`` should be consecutive, as
        :func:`~phylorl.phylo.spr.enumerate_moves` gives them."""
        if branches not in (0, 1, 3):
            raise ValueError(f"branches must be 0, 1 or 3, got {branches}")
        moves = np.ascontiguousarray(moves, dtype=np.int64)
        if moves.ndim != 2 or moves.shape[1] != 4:
            raise ValueError(f"moves must have shape [A, 4], got {moves.shape}")
        return self._lazy(tree, moves, branches, newton_iterations, newton_tol)

    def subtree_scores(
        self,
        tree: Tree,
        p: int,
        s: int,
        radius: int,
        *,
        radius_min: int = 1,
        branches: int = 0,
        reference: float = 0.0,
        cutoff: float = 0.0,
        dedupe: bool = False,
        newton_iterations: int = 32,
        newton_tol: float = 1e-7,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(moves, scores)``: every move pruning ``s`` from ``p`` whose distance ``d(p, x)`` lies in
        ``[radius_min, radius]`` (in :func:`~phylorl.phylo.spr.enumerate_moves`'s order) and its lazy score
        (:meth:`spr_scores`, ``branches`` 0, 1 or 3). With ``cutoff > 0`` the walk stops behind regrafts far
        below ``reference`` (the tree's log-likelihood; see :func:`~phylorl.phylo.lazy_spr.lazy_spr_scores`),
        and the moves it did not reach score ``-inf``. Every NNI move (distance 1) is scored, not only the
        canonical one of each topology (``dedupe=True``): the four moves giving one NNI topology leave
        different branch lengths, so their lazy scores differ, and the canonical one can score far below the
        others."""
        if branches not in (0, 1, 3):
            raise ValueError(f"branches must be 0, 1 or 3, got {branches}")
        moves = spr.subtree_moves(tree.neighbors, tree.n_leaves, p, s, radius_min, radius, dedupe)
        if not len(moves):
            return moves, np.empty(0)
        return moves, self._lazy(
            tree, moves, branches, newton_iterations, newton_tol, radius + 2, reference, cutoff
        )

    def _lazy(
        self, tree, moves, branches, newton_iterations, newton_tol, depth=16, reference=0.0, cutoff=0.0
    ):
        self._sync(tree)
        arrays = (self._arrays(tree), tree.lengths, self._b, self._m, self.pattern_weights)
        newton = (newton_iterations, newton_tol, self.brlen_min, self.brlen_max)
        out = np.full(moves.shape[0], -np.inf if cutoff > 0 else np.nan)
        want = max(4, min(depth, tree.n_nodes))
        while True:
            work = self._lazy_work
            if (
                work is None
                or work.D.shape[0] < want
                or work.D.shape[1:] != (self._n_cats, 4, self.n_patterns)
                or work.ints.shape[1] != 2 * tree.n_nodes + tree.n_edges
            ):
                work = self._lazy_work = lazy_spr.LazyWork.allocate(
                    want, tree.n_nodes, tree.n_edges, self._n_cats, self.n_patterns
                )
            status, n_updates = lazy_spr.lazy_spr_scores(
                moves, *arrays, newton, branches, float(reference), float(cutoff), work, out
            )
            self.n_partial_updates += n_updates
            if status != -2:
                break
            want = min(2 * want, tree.n_nodes)  # a walk deeper than the work space: grow it and score again
        if status >= 0:
            raise ValueError(
                f"move {status} {tuple(moves[status].tolist())} is not an SPR move of this tree (or "
                "repeats a regraft edge of its (p, s))"
            )
        self.n_lazy_scores += moves.shape[0]
        return out
