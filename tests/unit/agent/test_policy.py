"""AgentPolicy from checkpoints (greedy argmax of min(Q1, Q2)) and policy evaluation on shared start trees."""

import numpy as np
import pytest
import torch
from oracles.network import q_values
from policy_eval import evaluate_episodes, evaluate_policy, policy_from_learner

from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.agent.policy import AgentPolicy, resolve_checkpoint
from phylorl.env.config import EnvConfig
from phylorl.env.observation import observe
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from phylorl.records.collate import state_inputs

SMALL = NetworkConfig(features="rich", hidden=16, heads=4, action_hidden=16, head_hidden=16)


@pytest.fixture(scope="module")
def entry():
    data = simulate_dataset(7, 150, dataset_rng(5, 0), model=parse_model("JC"))
    return EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")


@pytest.fixture
def learner():
    learner = Learner(SMALL, AgentConfig(initial_alpha=0.2), seed=4)
    with torch.no_grad():  # spread the Q values so that the argmax is well defined
        learner.q1.head3.weight.mul_(50.0)
        learner.q2.head3.weight.mul_(30.0)
    return learner


def reference_q(learner, env):
    """min of Q1, Q2 over env.moves, computed here from the learner's own networks."""
    obs = observe(env.tree, env.moves, "rich", env.current.signals)
    graphs, actions = state_inputs([obs])
    with torch.no_grad():
        q1 = q_values(learner.q1.eval(), graphs, actions)  # as first designed
        q2 = q_values(learner.q2.eval(), graphs, actions)
    return torch.minimum(q1, q2).numpy()


def is_greedy(choice, q):
    """``choice`` has the largest Q (moves with identical inputs, e.g. branch lengths at their
    lower bound in symmetric places, tie exactly)."""
    return q[choice] >= q.max() - 1e-5 * max(1.0, abs(q.max()))


def test_policy_from_a_checkpoint_file_takes_the_argmax_of_the_twin_q(tmp_path, entry, learner):
    path = tmp_path / "learner.pt"
    learner.save(path)
    policy = AgentPolicy.from_checkpoint(path, tabu=0)
    assert policy.alpha == pytest.approx(0.2)
    env = TreeEnv([entry], EnvConfig(start="nj"), seed=3)
    env.reset()
    unique = 0
    for _ in range(6):
        q = reference_q(learner, env)
        np.testing.assert_allclose(policy.q_values(env), q, rtol=1e-5, atol=1e-5)
        choice = policy.choose(env)
        assert is_greedy(choice, q)
        top = np.sort(q)[-2:]
        if top[1] - top[0] > 1e-4:
            unique += 1
            assert choice == int(np.argmax(q))
        env.step(choice)
    assert unique >= 3  # most states have a single best move, so the test is not vacuous


def test_policy_from_a_run_directory_uses_checkpoints_latest(tmp_path, entry, learner):
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    Learner(SMALL, seed=9).save(checkpoints / "learner-000000001.pt")  # an older, different learner
    learner.save(checkpoints / "learner-000000007.pt")
    (checkpoints / "latest").write_text("learner-000000007.pt\n")
    assert resolve_checkpoint(tmp_path / "run") == checkpoints / "learner-000000007.pt"
    assert resolve_checkpoint(checkpoints) == checkpoints / "learner-000000007.pt"
    policy = AgentPolicy.from_checkpoint(tmp_path / "run")
    env = TreeEnv([entry], EnvConfig(start="nj"), seed=0)
    env.reset()
    assert is_greedy(policy.choose(env), reference_q(learner, env))
    assert not is_greedy(policy_from_learner(Learner(SMALL, seed=9)).choose(env), reference_q(learner, env))


def test_bad_checkpoints_fail_with_clear_messages(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        AgentPolicy.from_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(FileNotFoundError, match="without checkpoints/latest"):
        AgentPolicy.from_checkpoint(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest").write_text("learner-000000003.pt")
    with pytest.raises(FileNotFoundError, match="learner-000000003.pt"):
        AgentPolicy.from_checkpoint(tmp_path)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a learner checkpoint"):
        AgentPolicy.from_checkpoint(junk)
    torch.save({"format": 99}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a learner checkpoint of format"):
        AgentPolicy.from_checkpoint(tmp_path / "other.pt")


def test_every_policy_starts_from_the_same_trees(entry, learner):
    agent = policy_from_learner(learner)
    runs = {
        name: evaluate_episodes(policy, entry, episodes=3, steps=4, seed=7)
        for name, policy in (("agent", agent), ("random", "random"), ("greedy", "greedy"))
    }
    starts = {name: [r.start_loglik for r in results] for name, results in runs.items()}
    assert starts["agent"] == starts["random"] == starts["greedy"]
    assert len(set(starts["agent"])) == 3  # three different start trees
    assert all(r.steps == 4 for r in runs["agent"] + runs["random"])
    assert all(r.final_loglik >= r.start_loglik for r in runs["greedy"])  # greedy never goes down
    # the same seed gives the same episodes; deltas are final - start
    again = evaluate_policy("random", entry, episodes=3, steps=4, seed=7)
    assert again == [r.final_loglik - r.start_loglik for r in runs["random"]]
    assert evaluate_policy("random", entry, episodes=3, steps=4, seed=8) != again


def test_tabu_never_returns_to_a_tree_of_the_same_search(tmp_path, entry, learner):
    from phylorl.phylo import topology_hash

    path = tmp_path / "learner.pt"
    learner.save(path)
    plain, tabu = AgentPolicy.from_checkpoint(path, tabu=0), AgentPolicy.from_checkpoint(path, tabu=20)
    env = TreeEnv([entry], EnvConfig(start="random"), seed=5)
    env.reset()
    visited, revisits_without = {topology_hash(env.tree)}, 0
    for _ in range(12):
        choice = tabu.choose(env)
        revisits_without += plain.choose(env) != choice
        env.step(choice)
        tree = topology_hash(env.tree)
        assert tree not in visited  # 7 taxa, 56 moves: an unvisited tree is always among the top 20
        visited.add(tree)
    assert revisits_without > 0  # the plain greedy policy would have stepped back at least once
    env.reset()  # a new search forgets the old one's trees: its first choice is the plain argmax
    assert tabu.choose(env) == plain.choose(env)
