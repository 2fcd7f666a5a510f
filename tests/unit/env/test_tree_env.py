"""TreeEnv, VecTreeEnv, preparation cache and the classical search policies."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from oracles.features import observation_arrays

from phylorl.env.config import EnvConfig
from phylorl.env.prepare import PreparationCache, prepare_alignment
from phylorl.env.search import run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.env.vec_env import VecTreeEnv
from phylorl.phylo import LikelihoodEngine, load_alignment, parse_model, spr_neighbor, topology_hash
from phylorl.phylo.parsimony import parsimony_length


@pytest.fixture(scope="module")
def ds1(ds_dir):
    return load_alignment(ds_dir / "DS1.fasta")


@pytest.fixture(scope="module")
def ds1_entry(ds1):
    return EnvAlignment.build(ds1, prepare_alignment(ds1, "JC"), "DS1")


def test_reward_is_the_scaled_loglik_change(ds1_entry):
    config = EnvConfig(horizon=5, reward_scale=50.0)
    env = TreeEnv([ds1_entry], config, seed=1)
    obs, info = env.reset()
    fresh = LikelihoodEngine(ds1_entry.alignment, parse_model(ds1_entry.prepared.model))
    assert info["loglik"] == pytest.approx(fresh.loglik(env.tree), abs=1e-8)
    rng = np.random.default_rng(0)
    for _ in range(5):
        before = env.loglik
        obs, reward, terminal, truncated, info = env.step(int(rng.integers(obs.n_actions)))
        after = fresh.loglik(env.tree)  # the tree as it now is, scored from scratch
        assert info["loglik"] == pytest.approx(after, abs=1e-8)
        assert info["delta_loglik"] == pytest.approx(after - before, abs=1e-8)
        expected = (after - before) / abs(ds1_entry.prepared.nj_loglik) * 50.0
        assert reward == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_move_is_a_step_without_building_the_observation(ds1_entry):
    stepped, moved = (TreeEnv([ds1_entry], EnvConfig(horizon=5), seed=4) for _ in range(2))
    stepped.reset(0)
    moved.reset(0)
    for action in (3, 17, 0):
        obs, _, _, _, info = stepped.step(action)
        delta = moved.move(action)
        assert (
            delta == info["delta_loglik"] and moved.loglik == stepped.loglik and moved.steps == stepped.steps
        )
        assert np.array_equal(moved.moves, stepped.moves)
        assert moved._last is None  # no features computed
        again = moved.observation()  # built on demand, equal to step's
        assert_same_state(again, obs)
    with pytest.raises(IndexError, match="out of range"):
        moved.move(len(moved.moves))


def assert_same_state(a, b) -> None:
    for name in ("neighbors", "edges", "lengths", "moves"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert (a.rich is None) == (b.rich is None)
    if a.rich is not None:
        assert a.rich.deltas.tobytes() == b.rich.deltas.tobytes()
        assert a.rich.support.tobytes() == b.rich.support.tobytes()


def test_truncation_is_not_terminal(ds1_entry):
    env = TreeEnv([ds1_entry], EnvConfig(horizon=3), seed=2)
    obs, _ = env.reset()
    flags = []
    for _ in range(3):
        obs, _, terminal, truncated, _ = env.step(0)
        flags.append((terminal, truncated))
    assert flags == [(False, False), (False, False), (False, True)]


@pytest.mark.parametrize("features, edge_cols, move_cols", [("basic", 1, 3), ("rich", 3, 15)])
def test_observation_shapes_and_action_round_trip(ds1_entry, features, edge_cols, move_cols):
    env = TreeEnv([ds1_entry], EnvConfig(features=features), seed=3)
    state, _ = env.reset()
    obs = SimpleNamespace(**observation_arrays(state), n_actions=state.n_actions)
    n = ds1_entry.alignment.n_taxa
    assert obs.node_features.shape == (2 * n - 2, 1) and obs.node_features.dtype == np.float32
    assert obs.node_features[:n, 0].tolist() == [1.0] * n and obs.node_features[n:, 0].sum() == 0
    assert obs.edge_index.shape == (2, 2 * (2 * n - 3)) and obs.edge_index.dtype == np.int64
    assert obs.edge_attr.shape == (2 * (2 * n - 3), edge_cols)
    assert obs.n_actions == 2 * (n - 3) * (2 * n - 7)
    assert obs.actions.shape == (obs.n_actions, 4) and obs.action_meta.shape == (obs.n_actions, move_cols)
    assert np.isfinite(obs.action_meta).all() and np.isfinite(obs.edge_attr).all()
    # both directions of each edge, with the same length
    u, v = obs.edge_index
    assert np.array_equal(u[0::2], v[1::2]) and np.array_equal(v[0::2], u[1::2])
    assert np.array_equal(obs.edge_attr[0::2], obs.edge_attr[1::2])
    # action i is exactly the SPR move (p, s, x, y) in row i
    i = obs.n_actions // 3
    expected = topology_hash(spr_neighbor(env.tree, obs.actions[i]))
    env.step(i)
    assert topology_hash(env.tree) == expected


def test_seeded_and_reproducible(ds1_entry):
    def run(seed):
        env = TreeEnv([ds1_entry], EnvConfig(horizon=4), seed=seed)
        obs, _ = env.reset()
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(4):
            obs, r, *_ = env.step(int(rng.integers(obs.n_actions)))
            out.append((topology_hash(env.tree), round(r, 9)))
        return out

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_parsimony_starts_are_seeded_and_shorter_than_random_trees(ds1, ds1_entry):
    tips, weights = ds1_entry.signals.tips, ds1_entry.signals.weights

    def start(kind, seed):
        env = TreeEnv([ds1_entry], EnvConfig(start=kind), seed=seed)
        env.reset()
        assert env.tree.n_leaves == ds1.n_taxa
        assert env.loglik == pytest.approx(env.engine.loglik(env.tree), abs=1e-6)
        return topology_hash(env.tree), parsimony_length(env.tree, tips, weights)

    assert start("parsimony", 3) == start("parsimony", 3)
    drawn = [start("parsimony", seed) for seed in range(4)]
    assert len({key for key, _ in drawn}) > 1
    longest = max(length for _, length in drawn)
    assert all(longest < start("random", seed)[1] for seed in range(4))


def test_greedy_never_lowers_the_loglik(ds1_entry):
    env = TreeEnv([ds1_entry], EnvConfig(start="random", radius=2), seed=4)
    env.reset()
    result = run_search(env, "greedy", steps=4)
    assert result.steps >= 1
    values = [result.start_loglik, *result.trajectory]
    assert all(b > a for a, b in zip(values, values[1:]))
    assert result.final_loglik == pytest.approx(
        LikelihoodEngine(ds1_entry.alignment, "JC").loglik(result.tree), abs=1e-8
    )


def test_vec_env_steps_and_auto_resets(ds1_entry):
    vec = VecTreeEnv([ds1_entry], n_envs=3, config=EnvConfig(horizon=2), seed=10)
    obs = vec.reset()
    assert len(obs) == 3
    step = vec.step([0, 1, 2])
    assert not step.truncated.any() and step.obs[0] is step.next_obs[0]
    step = vec.step([0, 0, 0])
    assert step.truncated.all() and not step.terminal.any()
    for info, next_obs, new_obs in zip(step.infos, step.next_obs, step.obs):
        assert "episode_delta_loglik" in info
        assert new_obs is not next_obs  # a fresh episode started
    assert all(env.steps == 0 for env in vec.envs)
    with pytest.raises(ValueError, match="expected 3 actions"):
        vec.step([0, 1])


def test_preparation_is_cached_by_content(ds1, tmp_path):
    cache = PreparationCache(tmp_path / "prep")
    first = cache.get(ds1, "JC")
    files = list((tmp_path / "prep").glob("*.json"))
    assert len(files) == 1
    second = cache.get(ds1, "JC")
    assert second == first
    # an entry on disk is what the second call returned (tamper with it to prove it was read)
    files[0].write_text(files[0].read_text().replace(str(first.nj_loglik), "-1234.5"))
    assert cache.get(ds1, "JC").nj_loglik == -1234.5
    assert first.nj_loglik < 0 and first.model == "JC"


def test_a_preparation_by_other_code_is_not_served(ds1, tmp_path, monkeypatch):
    from phylorl.env import prepare

    cache = PreparationCache(tmp_path / "prep")
    cache.get(ds1, "JC")
    assert cache.has(ds1, "JC") and len(prepare.preparation_code()) == 16
    monkeypatch.setattr(prepare, "preparation_code", lambda: "code-of-another-version")
    assert not cache.has(ds1, "JC")
    cache.get(ds1, "JC")
    assert cache.has(ds1, "JC") and len(list((tmp_path / "prep").glob("*.json"))) == 2


def test_config_errors():
    with pytest.raises(ValueError, match="horizon"):
        EnvConfig(horizon=0)
    with pytest.raises(ValueError, match="start"):
        EnvConfig(start="stepwise")


@pytest.mark.parametrize("radius, features", [(None, "basic"), (3, "basic"), (None, "rich")])
def test_episode_transitions_are_stored_as_trees_and_read_back_exactly(ds1_entry, radius, features):
    from oracles.records import decode_transition

    from phylorl.records.codec import encode_transition
    from phylorl.types import Transition

    env = TreeEnv([ds1_entry], EnvConfig(horizon=4, radius=radius, features=features), seed=5)
    obs, _ = env.reset()
    transitions = []
    for step in range(4):
        action = (7 * step) % obs.n_actions
        next_obs, reward, terminal, truncated, _ = env.step(action)
        transitions.append(
            Transition(obs, action, reward, next_obs, terminal, truncated, policy_version=step)
        )
        obs = next_obs
    # encoded after the whole episode: the env's tree has changed since the early observations
    for t in transitions:
        data = encode_transition(t)
        # stored as trees (rich: plus each move's parsimony change and the supports); the moves and
        # their features are rebuilt. DS1: 27 taxa, 2 x (52 nodes, 51 edges, 2256 moves)
        assert len(data) < (2_000 if features == "basic" else 8_000), len(data)
        back = decode_transition(data)
        for a, b in ((t.obs, back.obs), (t.next_obs, back.next_obs)):
            assert_same_state(a, b)
        assert (back.action, back.reward, back.truncated, back.policy_version) == (
            t.action,
            t.reward,
            t.truncated,
            t.policy_version,
        )


def test_environments_on_one_alignment_keep_their_own_engine_state(ds1_entry):
    """Interleaved environments on the same alignment: each has its own engine, so each computes exactly
    what it computes alone (the same log-likelihoods and the same partial updates: none is recomputed
    because the other environment's tree came in between)."""
    config = EnvConfig(horizon=100, features="basic")

    def run(envs, rngs):
        logliks = [[] for _ in envs]
        for env in envs:
            env.reset(0)
        before = [env.engine.n_partial_updates for env in envs]
        for _ in range(5):
            for i, env in enumerate(envs):
                logliks[i].append(env.step(int(rngs[i].integers(len(env.moves))))[4]["loglik"])
        return logliks, [env.engine.n_partial_updates - b for env, b in zip(envs, before)]

    alone = [run([TreeEnv([ds1_entry], config, seed=s)], [np.random.default_rng(s)]) for s in (1, 2)]
    envs = [TreeEnv([ds1_entry], config, seed=s) for s in (1, 2)]
    together = run(envs, [np.random.default_rng(s) for s in (1, 2)])
    assert envs[0].engine is not envs[1].engine and envs[0].engine is not ds1_entry.engine
    assert together[0] == [a[0][0] for a in alone]
    assert together[1] == [a[1][0] for a in alone]


def test_a_vector_splits_into_groups_that_share_its_environments(ds1_entry):
    vec = VecTreeEnv([ds1_entry], 5, EnvConfig(horizon=3), seed=0)
    groups = vec.split(2)
    assert [len(g) for g in groups] == [2, 3] and sum((g.envs for g in groups), []) == vec.envs
    assert all(a is b for a, b in zip(sum((g.envs for g in groups), []), vec.envs))
    assert [len(g) for g in vec.split(5)] == [1] * 5 and vec.split(1)[0].envs == vec.envs
    for parts in (0, 6):
        with pytest.raises(ValueError, match="cannot split 5 environments"):
            vec.split(parts)
