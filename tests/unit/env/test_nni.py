"""NNI rounds: the independent improving NNIs of a tree applied at once (``phylorl.env.nni``), on a real alignment."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.env.climbs import LazyClimb
from phylorl.env.config import EnvConfig
from phylorl.env.nni import independent, nni_round
from phylorl.env.prepare import prepare_alignment
from phylorl.env.search import run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.phylo import (
    LikelihoodEngine,
    apply_spr,
    enumerate_moves,
    load_alignment,
    move_metadata,
    parse_model,
    spr_neighbor,
)
from phylorl.phylo.topology_key import topology_key


@pytest.fixture(scope="module")
def entry(real_dir):
    aln = load_alignment(real_dir / "train" / "TreeBASE_9860.phy")  # 20 taxa
    return aln, EnvAlignment.build(aln, prepare_alignment(aln, "JC"), "TreeBASE_9860")


def nni_neighbours(tree) -> set[int]:
    moves = enumerate_moves(tree)
    return {topology_key(spr_neighbor(tree, m)) for m in moves[move_metadata(tree, moves)[:, 2] == 2]}


def test_a_round_applies_independent_improving_nnis_and_keeps_the_likelihood_exact(entry):
    aln, item = entry
    env = TreeEnv([item], EnvConfig(start="random"), seed=3)
    env.reset()
    fresh = LikelihoodEngine(aln, parse_model("JC"))
    applied_several = False
    for _ in range(6):
        before, tree_before, steps = env.loglik, env.tree.copy(), env.steps
        applied = nni_round(env)
        if not applied:
            break
        assert env.loglik > before + 1e-6
        assert env.steps == steps + 1
        assert fresh.loglik(env.tree) == pytest.approx(env.loglik, abs=1e-6)  # the recorded value is the tree's
        if applied == 1:
            assert topology_key(env.tree) in nni_neighbours(tree_before)
        else:
            applied_several = True
            assert topology_key(env.tree) not in nni_neighbours(tree_before) | {topology_key(tree_before)}
    assert applied_several  # from a random start some round takes several NNIs at once


def test_no_round_at_a_local_optimum(entry):
    _, item = entry
    env = TreeEnv([item], EnvConfig(start="random"), seed=4)
    env.reset()
    run_search(env, LazyClimb(radius="auto"), steps=None)
    tree, loglik = env.tree.copy(), env.loglik
    assert nni_round(env) == 0
    assert env.loglik == loglik and topology_key(env.tree) == topology_key(tree)
    assert np.array_equal(env.tree.lengths, tree.lengths)


def test_independent_nnis_share_no_rewritten_node(entry):
    _, item = entry
    env = TreeEnv([item], EnvConfig(start="random"), seed=5)
    env.reset()
    moves = env.moves[move_metadata(env.tree, env.moves)[:, 2] == 2]
    chosen = independent(env.tree, moves)
    assert chosen[0] == 0 and 1 < len(chosen) < len(moves)
    touched = []
    for p, s, _, y in moves[chosen]:
        touched.extend([int(p), int(y), *(int(v) for v in env.tree.neighbors[p] if v != s)])
    assert len(touched) == len(set(touched))
    tree = env.tree.copy()  # applied one after the other, each still valid
    for move in moves[chosen]:
        apply_spr(tree, move)


def test_nniclimb_ends_at_an_spr_optimum_within_its_radius(entry):
    _, item = entry
    env = TreeEnv([item], EnvConfig(start="random"), seed=6)
    env.reset()
    result = run_search(env, "nniclimb", steps=None)
    assert result.final_loglik > result.start_loglik
    assert LazyClimb(radius="auto").choose(env) is None  # no move within the radius improves
