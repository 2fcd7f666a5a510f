"""InProcessTrainer: experience collection, n-step transitions with the actor's priorities, updates."""

import numpy as np
import pytest
import torch
from inprocess_trainer import InProcessTrainer, TrainerConfig
from oracles.records import decode_transition

from phylorl.agent.config import AgentConfig
from phylorl.agent.losses import soft_value
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from phylorl.records.codec import encode_observation
from phylorl.records.collate import state_inputs

SMALL = NetworkConfig(features="rich", hidden=16, heads=4, action_hidden=16, head_hidden=16)


@pytest.fixture(scope="module")
def corpus():
    out = []
    for i in range(2):
        data = simulate_dataset(6, 120, dataset_rng(11, i), model=parse_model("JC"))
        out.append(EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), f"sim{i}"))
    return out


def q_and_v(trainer, obs):
    """``min(Q1, Q2)`` of every action of ``obs`` ``[A]`` and ``V(obs)``, from the trainer's networks."""
    nets = (trainer.learner.q1.eval(), trainer.learner.q2.eval())
    graphs, actions = state_inputs([obs])
    with torch.no_grad():
        q = torch.minimum(nets[0](graphs, actions), nets[1](graphs, actions))
        v = soft_value(q, actions.states, trainer.learner.alpha)
    return q.numpy(), v.item()


def test_counts_of_steps_episodes_transitions_and_updates(corpus):
    cfg = TrainerConfig(n_envs=2, gamma=0.9, n_step=1, batch_size=4, min_replay=8, replay_capacity=100)
    trainer = InProcessTrainer(corpus, EnvConfig(horizon=3), SMALL, AgentConfig(lr=1e-3), cfg, seed=0)
    seen = []
    history = trainer.train(10, on_progress=lambda h: seen.append((h.env_steps, h.updates)))
    assert history.env_steps == 20
    # episodes end at steps 3, 6, 9 in both environments; each is inserted at the next action
    # selection (which gives V(s_T)), so the replay holds 6, 12, 18 transitions after steps 4, 7, 10
    assert len(history.episode_delta_loglik) == 6 and len(trainer.replay) == 18
    assert [u for _, u in seen] == [0, 0, 0, 0, 0, 0, 1, 2, 3, 4]  # updates once 12 >= min_replay
    assert trainer.learner.weights_version == history.updates == len(history.metrics) == 4
    assert all(np.isfinite(m["loss/q1"]) for m in history.metrics)
    # episode returns are the scaled ΔlogL (reward = ΔlogL / |logL_NJ| * 100, summed over the episode)
    assert all(np.isfinite(history.episode_return))


def test_n_step_transitions_carry_the_actor_initial_priority(corpus):
    # no updates: the networks stay as they acted, so every priority can be recomputed here
    cfg = TrainerConfig(
        n_envs=2, gamma=0.8, n_step=2, batch_size=4, min_replay=8, updates_per_step=0.0, replay_alpha=1.0
    )
    trainer = InProcessTrainer(
        corpus, EnvConfig(horizon=3), SMALL, AgentConfig(initial_alpha=0.3), cfg, seed=1
    )
    trainer.train(7)
    assert trainer.learner.weights_version == 0
    records, priorities = trainer.replay.get(trainer.replay.keys)
    transitions = [decode_transition(r) for r in records]
    assert len(transitions) == 12  # 2 environments x 2 finished episodes x 3 transitions
    for i, t in enumerate(transitions):
        position = i % 3  # transitions are inserted per episode, in step order
        k = 2 if position < 2 else 1
        assert t.discount == pytest.approx(0.8**k)
        assert t.truncated == (position >= 1) and not t.terminal  # the windows reaching the horizon
        q, _ = q_and_v(trainer, t.obs)
        _, v_next = q_and_v(trainer, t.next_obs)
        assert priorities[i] == pytest.approx(
            abs(t.reward + t.discount * v_next - q[t.action]), rel=1e-4, abs=1e-5
        )
        if position == 0:  # a 2-step window ends where the third step starts
            assert _states(records[i])[1] == _states(records[i + 2])[0]
            assert t.policy_version == 0


def _states(record) -> tuple[bytes, bytes]:
    """The two states of a transition record, as encoded on their own."""
    t = decode_transition(record)
    return encode_observation(t.obs), encode_observation(t.next_obs)


def test_training_moves_the_weights_and_replay_priorities(corpus):
    cfg = TrainerConfig(n_envs=2, gamma=0.9, n_step=1, batch_size=8, min_replay=8, updates_per_step=2.0)
    trainer = InProcessTrainer(corpus, EnvConfig(horizon=2), SMALL, AgentConfig(lr=1e-2), cfg, seed=2)
    before = {k: v.clone() for k, v in trainer.learner.q1.state_dict().items()}
    trainer.train(8)
    assert trainer.learner.weights_version == trainer.history.updates > 0
    # episodes end at steps 2, 4, 6, 8 and are inserted a step later: 8 transitions after step 5,
    # so steps 5..8 make 2 updates each
    assert trainer.history.updates == 8
    after = trainer.learner.q1.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    _, priorities = trainer.replay.get(trainer.replay.keys)
    assert np.all(np.isfinite(priorities)) and np.all(priorities >= 0)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="n_step"):
        TrainerConfig(n_step=0)
    with pytest.raises(ValueError, match="min_replay"):
        TrainerConfig(min_replay=10, replay_capacity=5)
    with pytest.raises(ValueError, match="gamma"):
        TrainerConfig(gamma=1.5)
    with pytest.raises(ValueError, match="updates_per_step"):
        TrainerConfig(updates_per_step=-1)
