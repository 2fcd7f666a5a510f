"""What of the CUDA-graph learner can be checked without a GPU (the graphs themselves: tests/gpu)."""

import dataclasses

import numpy as np
import pytest

from phylorl.agent.batch import collate
from phylorl.agent.config import AgentConfig
from phylorl.agent.cuda_graphs import CudaGraphs, signature
from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_transition

NET = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


def test_on_the_cpu_the_option_changes_nothing():
    learner = Learner(NET, AgentConfig(cuda_graphs=True), "cpu")
    assert learner.graphs is None


@pytest.mark.parametrize("change", [{"network_path": "reference"}, "dropout"])
def test_graphs_refuse_what_they_cannot_replay(change):
    net = dataclasses.replace(NET, dropout=0.1) if change == "dropout" else NET
    agent = AgentConfig(**change) if isinstance(change, dict) else AgentConfig()
    with pytest.raises(ValueError, match="network_path|dropout"):
        CudaGraphs(Learner(net, agent, "cpu"))


def test_the_signature_separates_shapes_and_host_flags_not_contents():
    rng = np.random.default_rng(0)
    a = collate([random_transition(8, rng) for _ in range(4)])
    b = collate([random_transition(8, rng) for _ in range(4)])
    c = collate([random_transition(9, rng) for _ in range(4)])
    assert signature(a) == signature(b)  # same tree size: one capture serves both
    assert signature(a) != signature(c)
    assert signature(a) != signature(dataclasses.replace(a, bootstraps=not a.bootstraps))
