"""TreeGATConv holds PyG's GATConv parameters without importing PyG; the oracle runs GATConv's own forward on
them."""

import subprocess
import sys

import pytest
import torch
from oracles.network import gat_layer
from torch_geometric.nn import GATConv

from phylorl.nets.gat import TreeGATConv


@pytest.mark.parametrize("self_loops", [True, False])
def test_a_seed_gives_the_parameters_gatconv_gets_and_leaves_the_generator_where_gatconv_does(self_loops):
    torch.manual_seed(5)
    pyg = GATConv(64, 16, heads=4, concat=True, edge_dim=3, add_self_loops=self_loops)
    after_pyg = torch.rand(4)
    torch.manual_seed(5)
    ours = TreeGATConv(64, 16, heads=4, edge_dim=3, self_loops=self_loops)
    after_ours = torch.rand(4)
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in pyg.named_parameters()]
    assert ours.state_dict().keys() == pyg.state_dict().keys()
    for name, value in pyg.state_dict().items():
        assert torch.equal(ours.state_dict()[name], value), name
    assert torch.equal(after_ours, after_pyg)
    assert float(ours.att_edge.abs().sum()) > 0 and float(ours.bias.abs().sum()) == 0


def test_the_oracles_layer_is_gatconvs_on_these_parameters_and_trains_them():
    torch.manual_seed(2)
    ours = TreeGATConv(8, 4, heads=2, edge_dim=3)
    pyg = GATConv(8, 4, heads=2, concat=True, edge_dim=3)
    with torch.no_grad():
        ours.bias.normal_()
    pyg.load_state_dict(ours.state_dict())
    x, attr = torch.randn(5, 8), torch.randn(8, 3)
    edges = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]])
    out = gat_layer(ours, x, edges, attr)
    assert torch.equal(out, pyg(x, edges, attr))
    out.square().sum().backward()
    assert all(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in ours.parameters())
    assert not any(p.device.type == "meta" for p in ours.parameters())


def test_the_agents_processes_do_not_import_torch_geometric():
    code = (
        "import sys, phylorl.agent.policy, services.learner.training;"
        "print(sorted(m for m in ('torch_geometric', 'torch._dynamo') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
