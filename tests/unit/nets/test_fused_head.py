"""The fused Triton head (``TwinQ(fused=True)``, ``AgentConfig.fused_head``) equals the unfused head and the
network as first designed (``tests/oracles/network.py``; relative 1e-5, float32), on the CPU through Triton's
interpreter.

Triton sets its interpreter up only when ``TRITON_INTERPRET=1`` is in the environment before it is first
imported, so the comparisons run in a child process: this file run as a script prints one JSON line of
relative errors, which the tests below read. (``tests/gpu/test_fused_head_gpu.py`` compares the compiled
kernel on a GPU.)
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from phylorl.nets import fused_head
from phylorl.nets.config import NetworkConfig
from phylorl.nets.twin import TwinQ

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-5


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest difference over the reference's scale."""
    return float((a - b).abs().max() / b.abs().max())


def network_errors() -> dict:
    """The fused twin against the unfused twin and against both networks' PyG reference path."""
    from oracles.network import q_values
    from test_qnet import batch, perturbed  # (same directory)

    out = {}
    configs = {
        "design": NetworkConfig(features="basic"),
        "rich": NetworkConfig(features="rich", hidden=64, action_hidden=32, head_hidden=64, gat_layers=2),
    }
    for name, cfg in configs.items():
        q1, q2 = perturbed(cfg, seed=1).eval(), perturbed(cfg, seed=2).eval()
        for sizes in ([9], [5, 11, 7]):
            graphs, actions = batch(sizes, seed=len(sizes), rich=False)
            if cfg.features == "rich":
                graphs, actions = rich_batch(sizes)
            for reduce in ("min", "mean"):
                fused = TwinQ(q1, q2, fused=True)(graphs, actions, reduce=reduce)
                plain = TwinQ(q1, q2)(graphs, actions, reduce=reduce)
                with torch.no_grad():
                    both = torch.stack([q_values(q, graphs, actions) for q in (q1, q2)])
                ref = both.amin(0) if reduce == "min" else both.mean(0)
                key = f"{name}/{'+'.join(map(str, sizes))}/{reduce}"
                out[key] = {
                    "unfused": relative(fused, plain),
                    "reference": relative(fused, ref),
                    "moves": int(actions.nodes.shape[0]),
                }
    return out


def rich_batch(sizes):
    """Rich-feature states of the real environment (the shipped agent's feature set), one per size."""
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo.simulate import simulate_dataset
    from phylorl.records.collate import state_inputs

    rng = np.random.default_rng(7)
    states = []
    for n in sizes:
        alignment = simulate_dataset(n, 200, rng).alignment
        env = TreeEnv(
            [EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "sim")], EnvConfig(), seed=n
        )
        states.append(env.reset()[0])
    assert states[0].features == "rich"
    return state_inputs(states)


def learner_errors() -> dict:
    """Two updates of a learner whose next-move passes run fused against one whose do not."""
    from helpers import batch_of

    from phylorl.agent.learner import Learner
    from phylorl.nets.synthetic import random_transition

    cfg = NetworkConfig(hidden=64, action_hidden=64, head_hidden=64)
    rng = np.random.default_rng(3)
    batches = [batch_of([random_transition(8, rng, rich=True) for _ in range(6)]) for _ in range(2)]
    plain, fused = Learner(cfg, seed=4), Learner(cfg, seed=4)
    fused.twins = (TwinQ(fused.target1, fused.target2, fused=True), TwinQ(fused.q1, fused.q2, fused=True))
    out = {}
    for i, b in enumerate(batches):
        m_plain, p_plain = plain.step(b)
        m_fused, p_fused = fused.step(b)
        out[f"update{i}/target_mean"] = abs(m_fused["target/mean"] - m_plain["target/mean"]) / abs(
            m_plain["target/mean"]
        )
        out[f"update{i}/entropy"] = (
            abs(m_fused["entropy/mean"] - m_plain["entropy/mean"]) / m_plain["entropy/mean"]
        )
        out[f"update{i}/priorities"] = relative(torch.from_numpy(p_fused), torch.from_numpy(p_plain))
        # the gradients, all in one vector (some, such as the attention's destination weights, are rounding
        # noise around 0: the softmax over a node's neighbours does not depend on them)
        out[f"update{i}/gradients"] = relative(
            *(
                torch.cat([p.grad.flatten() for net in (learner.q1, learner.q2) for p in net.parameters()])
                for learner in (fused, plain)
            )
        )
    return out


@pytest.fixture(scope="module")
def interpreted(need_module):
    need_module("triton")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH")])
        ),
    }
    done = subprocess.run(
        [sys.executable, str(Path(__file__))], env=env, capture_output=True, text=True, timeout=600, cwd=HERE
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_fused_twin_equals_the_unfused_head_and_the_reference(interpreted):
    errors = interpreted["networks"]
    assert len(errors) == 8
    for key, e in errors.items():
        assert e["moves"] > 0
        assert e["unfused"] <= TOLERANCE, (key, e)
        assert e["reference"] <= TOLERANCE, (key, e)


def test_learner_with_the_fused_head_updates_as_without(interpreted):
    errors = interpreted["learner"]
    assert set(errors) == {
        f"update{i}/{name}" for i in (0, 1) for name in ("target_mean", "entropy", "priorities", "gradients")
    }
    for key, e in errors.items():
        assert e <= TOLERANCE, (key, e)


def test_fused_head_rejects_what_it_cannot_take(need_module):
    need_module("triton")
    cfg = NetworkConfig(hidden=32, action_hidden=16, head_hidden=24)
    from test_qnet import perturbed

    with pytest.raises(ValueError, match="power of two"):
        TwinQ(perturbed(cfg), perturbed(cfg), fused=True)
    table, nodes, meta = torch.zeros(2, 12, 64), torch.zeros(5, 4, dtype=torch.long), torch.ones(5, 3)
    meta_rows, w2, b2, w3, b3 = (
        torch.zeros(2, 3, 64),
        torch.zeros(2, 64, 64),
        torch.zeros(2, 64),
        torch.zeros(2, 64),
        torch.zeros(2),
    )
    with pytest.raises(ValueError, match="do not match"):
        fused_head.fused_twin_head(table, nodes, meta[:, :2], meta_rows, w2, b2, w3, b3)
    with pytest.raises(ValueError, match="float32"):
        fused_head.fused_twin_head(table.double(), nodes, meta, meta_rows, w2, b2, w3, b3)
    if not os.environ.get("TRITON_INTERPRET"):  # this process's Triton has no interpreter: the CPU is refused
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
            fused_head.fused_twin_head(table, nodes, meta, meta_rows, w2, b2, w3, b3)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(json.dumps({"networks": network_errors(), "learner": learner_errors()}))
