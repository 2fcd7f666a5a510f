"""Agent-guided climbs and the polish: answers are SPR local optima, never worse than the start."""

import numpy as np
import pytest
from policy_eval import policy_from_learner

from phylorl.agent.learner import Learner
from phylorl.agent.policy import GuidedClimb, polish
from phylorl.env.climbs import IMPROVEMENT_EPS
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.search import run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset

SMALL = NetworkConfig(features="rich", hidden=16, heads=4, action_hidden=16, head_hidden=16)


@pytest.fixture(scope="module")
def entry():
    data = simulate_dataset(8, 300, dataset_rng(21, 0), model=parse_model("JC"))
    return EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")


@pytest.fixture(scope="module")
def agent():
    return policy_from_learner(Learner(SMALL, seed=3))


def is_local_optimum(env):
    return (env.evaluate_moves() <= env.loglik + IMPROVEMENT_EPS).all()


def test_certified_guided_climb_ends_at_an_spr_local_optimum(entry, agent):
    env = TreeEnv([entry], EnvConfig(start="random"), seed=0)
    env.reset(0)
    start = env.loglik
    result = run_search(env, GuidedClimb(agent), steps=None)
    assert result.best_loglik > start and result.steps > 0
    env.reset(0, tree=result.best_tree)
    assert is_local_optimum(env)


def test_uncertified_climb_stops_when_no_top_move_improves(entry, agent):
    env = TreeEnv([entry], EnvConfig(start="random"), seed=1)
    env.reset(0)
    climb = GuidedClimb(agent, top=0.0, min_top=1, certify=False)
    result = run_search(env, climb, steps=None)
    env.reset(0, tree=result.best_tree)
    top = int(np.argmax(agent.q_values(env)))
    assert env.evaluate_moves([top])[0] <= env.loglik + IMPROVEMENT_EPS + 1e-3


@pytest.mark.parametrize("with_agent", [True, False])
def test_polish_answers_a_local_optimum_at_least_as_good_as_its_start(entry, agent, with_agent):
    env = TreeEnv([entry], EnvConfig(start="random"), seed=2)
    env.reset(0)
    start = env.loglik
    result = polish(env, agent if with_agent else None, restarts=2, rng=np.random.default_rng(0))
    assert result.start_loglik == pytest.approx(start) and result.best_loglik >= start
    assert result.evaluations > 0
    check = TreeEnv([entry], EnvConfig(start="random"), seed=2)
    check.reset(0, tree=result.best_tree)
    assert check.loglik == pytest.approx(result.best_loglik, abs=1e-2)
    assert is_local_optimum(check)


def test_lazy_margin_checks_the_other_moves_by_their_lazy_scores_first(entry, agent):
    """With ``lazy_margin`` the certifying scan evaluates fully only the moves whose lazy score is close: an
    infinite margin still certifies a true SPR local optimum, and the polish's margin spends fewer full
    evaluations than the exhaustive scan from the same start."""
    results = {}
    for margin in (None, np.inf, 10.0):
        env = TreeEnv([entry], EnvConfig(start="random"), seed=4)
        env.reset(0)
        results[margin] = run_search(
            env, GuidedClimb(agent, top=0.0, min_top=1, lazy_margin=margin), steps=None
        )
        if margin == np.inf:
            assert is_local_optimum(env)
    assert results[np.inf].best_loglik == pytest.approx(results[None].best_loglik, abs=1e-6)
    assert results[10.0].evaluations < results[None].evaluations
    with pytest.raises(ValueError, match="lazy_margin"):
        GuidedClimb(agent, lazy_margin=-1.0)
    with pytest.raises(ValueError, match="lazy_top"):
        GuidedClimb(agent, lazy_top=0)


def test_lazy_top_evaluates_fully_the_best_top_moves_by_lazy_score_first(entry, agent):
    """With ``lazy_top`` a step evaluates fully only the best of the agent's top moves by lazy score, unless
    none of those improves; without a margin the rest of the top is then evaluated, so an uncertified climb
    still stops only where no top move improves."""
    env = TreeEnv([entry], EnvConfig(start="random"), seed=5)
    env.reset(0)
    climb = GuidedClimb(agent, top=0.25, min_top=8, certify=False, lazy_top=2)
    result = run_search(env, climb, steps=None)
    assert result.best_loglik > result.start_loglik
    env.reset(0, tree=result.best_tree)
    top = np.argsort(-agent.q_values(env), kind="stable")[: max(8, int(np.ceil(0.25 * len(env.moves))))]
    assert env.evaluate_moves(top).max() <= env.loglik + IMPROVEMENT_EPS + 1e-3
