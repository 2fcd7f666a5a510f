"""LikelihoodEngine: hand-computed values, IQ-TREE's numbers, incremental updates, branch optimisation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from phylorl.phylo import (
    LikelihoodEngine,
    Tree,
    apply_spr,
    build_model,
    edges_near,
    enumerate_moves,
    load_alignment,
    parse_alignment,
    parse_model,
    random_tree,
    read_newick,
)

DATASETS = ["DS1", "DS2", "DS3", "DS4"]


def _jc_p(t: float) -> np.ndarray:
    same = 0.25 + 0.75 * np.exp(-4.0 * t / 3.0)
    diff = 0.25 - 0.25 * np.exp(-4.0 * t / 3.0)
    return np.where(np.eye(4, dtype=bool), same, diff)


def _four_taxon(lengths) -> Tree:
    # ((a,b)4,(c,d)5): leaves 0..3, internal 4 and 5; edges a-4, b-4, 4-5, 5-c, 5-d
    edges = np.array([[4, 0], [4, 1], [4, 5], [5, 2], [5, 3]])
    return Tree.from_edges(edges, np.asarray(lengths, dtype=float), ("a", "b", "c", "d"))


def _brute_force(tree: Tree, codes: np.ndarray, model) -> float:
    """Sum over every assignment of states to the internal nodes (no pruning): an independent check."""
    n = tree.n_leaves
    internal = list(range(n, tree.n_nodes))
    total = 0.0
    for site in range(codes.shape[1]):
        site_lik = 0.0
        for c in range(len(model.rates)):
            P = {e: model.p_matrix(tree.lengths[e])[c] for e in range(tree.n_edges)}
            acc = 0.0
            for states in itertools.product(range(4), repeat=len(internal)):
                state = dict(zip(internal, states))
                root = internal[0]
                term = model.freqs[state[root]]
                for e, (u, v) in enumerate(tree.edges):
                    # orient every edge away from the root node by a BFS depth
                    pu, pv = int(u), int(v)
                    if _depth(tree, pv, root) < _depth(tree, pu, root):
                        pu, pv = pv, pu
                    if pv >= n:
                        term *= P[e][state[pu], state[pv]]
                    else:
                        mask = codes[pv, site]
                        term *= sum(P[e][state[pu], j] for j in range(4) if mask >> j & 1)
                acc += term
            site_lik += model.weights[c] * acc
        if model.pinv > 0:
            common = np.bitwise_and.reduce(codes[:, site])
            site_lik += model.pinv * sum(model.freqs[j] for j in range(4) if common >> j & 1)
        total += np.log(site_lik)
    return total


def _depth(tree: Tree, v: int, root: int) -> int:
    order, parent = tree.preorder(root)
    depth = {root: 0}
    for node in order[1:]:
        depth[int(node)] = depth[int(parent[node])] + 1
    return depth[v]


def test_hand_computed_jc_four_taxa():
    aln = parse_alignment(">a\nAC\n>b\nAG\n>c\nCG\n>d\nCN\n", "fasta")
    lengths = [0.1, 0.2, 0.3, 0.15, 0.05]
    tree = _four_taxon(lengths)
    # site 1 (A, A, C, C) by hand: sum over x (node 4) and y (node 5) with JC transition matrices
    P = [_jc_p(t) for t in lengths]
    expected = 0.0
    for site in ({0: 0, 1: 0, 2: 1, 3: 1}, {0: 1, 1: 2, 2: 2, 3: None}):
        lik = 0.0
        for x in range(4):
            for y in range(4):
                term = 0.25 * P[0][x, site[0]] * P[1][x, site[1]] * P[2][x, y] * P[3][y, site[2]]
                term *= 1.0 if site[3] is None else P[4][y, site[3]]  # N is every state: sums to 1
                lik += term
        expected += np.log(lik)
    engine = LikelihoodEngine(aln, "JC")
    assert engine.loglik(tree) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "model_string",
    ["JC", "HKY{2.5}+F{0.3,0.2,0.2,0.3}", "GTR{1.5,3,0.7,1.2,4}+F{0.1,0.4,0.3,0.2}+I{0.25}+G4{0.6}"],
)
def test_brute_force_five_taxa_with_ambiguity(model_string):
    text = ">a\nACRTN-\n>b\nAGGTTC\n>c\nCGGAYC\n>d\nCTGAGC\n>e\nATGWGC\n"
    aln = parse_alignment(text, "fasta")
    rng = np.random.default_rng(3)
    tree = random_tree(aln.taxa, rng, mean_length=0.2)
    model = build_model(parse_model(model_string))
    engine = LikelihoodEngine(aln, model)
    assert engine.loglik(tree) == pytest.approx(_brute_force(tree, aln.codes, model), rel=1e-10)


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("tag", ["JC", "GTR_G4"])
def test_reference_logliks(ds_reference, dataset, tag):
    ref = ds_reference(dataset, tag)
    aln = load_alignment(ref["alignment"])
    tree = read_newick(ref["tree"], aln)
    engine = LikelihoodEngine(aln, parse_model(ref["model"]))
    assert abs(engine.loglik(tree) - ref["loglik_fixed"]) <= 1e-3


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("tag", ["JC", "GTR_G4"])
def test_branch_optimisation_reaches_iqtree(ds_reference, dataset, tag):
    ref = ds_reference(dataset, tag)
    aln = load_alignment(ref["alignment"])
    tree = read_newick(ref["tree"], aln)
    tree.lengths[:] = 0.05  # forget IQ-TREE's lengths: start from a flat guess
    engine = LikelihoodEngine(aln, parse_model(ref["model"]))
    before = engine.loglik(tree)
    after = engine.optimize_branch_lengths(tree, rounds=100, tol=1e-6)
    # IQ-TREE's value for this model string on its ML tree (for GTR the search's own score used
    # unrounded parameters, so it is comparable only for JC)
    assert after >= ref["loglik_fixed"] - 0.01
    if tag == "JC":
        assert after >= ref["iqtree_ml_search_best"] - 0.01
    assert after > before
    # the returned value is the tree's log-likelihood, recomputed from scratch
    assert LikelihoodEngine(aln, parse_model(ref["model"])).loglik(tree) == pytest.approx(after, abs=1e-8)


@pytest.mark.parametrize("model_string", ["JC", "GTR{0.6,2.1,0.5,1.4,3.3}+F+I{0.2}+G4{0.5}"])
def test_incremental_equals_full_after_spr(ds_reference, model_string):
    ref = ds_reference("DS1", "JC")
    aln = load_alignment(ref["alignment"])
    rng = np.random.default_rng(11)
    tree = random_tree(aln.taxa, rng, mean_length=0.05)
    engine = LikelihoodEngine(aln, parse_model(model_string))
    engine.loglik(tree)
    for step in range(60):
        moves = enumerate_moves(tree)
        move = moves[rng.integers(len(moves))]
        apply_spr(tree, move)
        incremental = engine.loglik(tree)
        if step % 3 == 0:
            incremental = engine.optimize_branch_lengths(tree, edges_near(tree, [move[0]], 1), rounds=2)
        full = LikelihoodEngine(aln, parse_model(model_string)).loglik(tree)
        assert incremental == pytest.approx(full, rel=1e-9)
    # only part of the partials were recomputed per move, not the whole tree each time
    assert engine.n_partial_updates < 60 * (tree.n_nodes - 2) * 0.75


def test_no_stale_partial_after_moves_and_branch_passes(ds_reference):
    """Every partial the engine keeps as valid is the one a fresh engine computes: the log-likelihood at every
    edge (both partials of each read) equals a fresh engine's after SPR moves, local and full branch passes
    (whose invalidation stops at partials already invalid) and lengths set by hand."""
    ref = ds_reference("DS1", "JC")
    aln = load_alignment(ref["alignment"])
    model = parse_model("GTR{0.6,2.1,0.5,1.4,3.3}+F+G4{0.5}")
    rng = np.random.default_rng(5)
    tree = random_tree(aln.taxa, rng, mean_length=0.05)
    engine = LikelihoodEngine(aln, model)
    engine.loglik(tree)
    for step in range(24):
        kind = step % 4
        if kind == 0:
            moves = enumerate_moves(tree)
            move = moves[rng.integers(len(moves))]
            apply_spr(tree, move)
            engine.optimize_branch_lengths(tree, edges_near(tree, [move[0]], 1), rounds=2)
        elif kind == 1:
            engine.optimize_branch_lengths(tree, rounds=1)
        elif kind == 2:
            changed = rng.choice(tree.n_edges, size=3, replace=False)
            tree.lengths[changed] = rng.uniform(0.01, 0.3, size=3)
            engine.loglik(tree)
        else:
            engine.optimize_branch_lengths(tree, rng.choice(tree.n_edges, size=6, replace=False), rounds=3)
        full = LikelihoodEngine(aln, model).loglik(tree)
        for e in range(tree.n_edges):
            assert engine._loglik_at(tree, e) == pytest.approx(full, rel=1e-10), (step, e)


def test_free_parameters_are_estimated(ds_reference):
    ref = ds_reference("DS1", "GTR_G4")
    aln = load_alignment(ref["alignment"])
    tree = read_newick(ref["tree"], aln)
    engine = LikelihoodEngine(aln, parse_model("GTR+F+G4"))
    assert engine.model is None
    loglik = engine.loglik(tree)
    # IQ-TREE estimated these parameters on the same tree; ours must be as good (within 0.05)
    assert loglik >= ref["loglik_fixed"] - 0.05
    assert engine.model.spec.alpha == pytest.approx(0.1447, rel=0.05)
    assert not engine.model.spec.free_parameters


def test_wrong_taxa_are_rejected():
    aln = parse_alignment(">a\nAC\n>b\nAG\n>c\nCG\n>d\nCT\n", "fasta")
    other = Tree.from_edges(
        np.array([[4, 0], [4, 1], [4, 5], [5, 2], [5, 3]]), np.full(5, 0.1), ("a", "b", "c", "x")
    )
    with pytest.raises(ValueError, match="alignment"):
        LikelihoodEngine(aln, "JC").loglik(other)


def test_site_logliks_sum_to_loglik(ds_reference):
    ref = ds_reference("DS2", "GTR_G4")
    aln = load_alignment(ref["alignment"])
    tree = read_newick(ref["tree"], aln)
    engine = LikelihoodEngine(aln, parse_model(ref["model"]))
    sites = engine.site_logliks(tree)
    assert sites.shape == (aln.n_sites,)
    assert sites.sum() == pytest.approx(engine.loglik(tree), rel=1e-12)


def test_partials_are_kept_for_internal_heads_only_one_row_each():
    """3(n-2) rows: every directed edge with an internal head has its own, before and after SPR moves."""
    from phylorl.phylo import apply_spr, enumerate_moves, random_tree
    from phylorl.phylo.kernels import clv_index
    from phylorl.phylo.simulate import simulate_dataset

    rng = np.random.default_rng(12)
    data = simulate_dataset(15, 100, rng)
    engine = LikelihoodEngine(data.alignment, "JC")
    tree = random_tree(data.alignment.taxa, rng)
    engine.loglik(tree)
    assert engine._b.clv.shape[0] == engine._b.scale.shape[0] == 3 * (tree.n_leaves - 2)
    for _ in range(5):
        rows = [
            clv_index(d, tree.neighbors, tree.edges, tree.n_leaves)
            for d in range(2 * tree.n_edges)
            if tree.edges[d >> 1, 1 - (d & 1)] >= tree.n_leaves
        ]
        assert sorted(rows) == list(range(3 * (tree.n_leaves - 2)))
        moves = enumerate_moves(tree)
        apply_spr(tree, moves[rng.integers(len(moves))])
        assert engine.loglik(tree) == pytest.approx(
            LikelihoodEngine(data.alignment, "JC").loglik(tree), abs=1e-8
        )
