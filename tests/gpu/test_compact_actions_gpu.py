"""Compact next moves expanded on a GPU (tensor gathers) equal the host's batch bit for bit, and a learner on
a GPU takes the compact batch the learner service hands it (needs a CUDA device: skipped elsewhere; run on a
lent GPU machine with ``pytest tests/gpu``). ``tests/unit/records/test_collate.py`` checks the same on the
CPU against the numpy oracle."""

import numpy as np
import pytest
import torch

from phylorl.agent.transfer import on_device
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.compact_actions import CompactActions
from phylorl.phylo.simulate import simulate_dataset
from phylorl.records.codec import encode_transition
from phylorl.records.collate import collate_records
from phylorl.records.format import PackedRecords
from phylorl.types import Transition

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _records(steps: int = 24) -> PackedRecords:
    alignment = simulate_dataset(20, 400, np.random.default_rng(3)).alignment
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "a")], EnvConfig(horizon=8), seed=3
    )
    rng = np.random.default_rng(3)
    obs, _ = env.reset()
    records = []
    for _ in range(steps):
        action = int(rng.integers(obs.n_actions))
        nxt, reward, terminal, truncated, _ = env.step(action)
        records.append(encode_transition(Transition(obs, action, reward, nxt, terminal, truncated)))
        obs = env.reset()[0] if truncated else nxt
    return PackedRecords.from_records(records)


def test_compact_moves_expand_on_the_gpu_to_the_host_batch():
    records = _records()
    compact, _ = collate_records(records)
    host = on_device(compact, "cpu")
    assert isinstance(compact.next_actions, CompactActions)
    for pin in (False, True):
        device = on_device(compact, "cuda", pin_memory=pin).next_actions
        assert device.nodes.is_cuda and device.meta.is_cuda
        assert torch.equal(device.nodes.cpu(), host.next_actions.nodes)
        assert device.meta.cpu().numpy().tobytes() == host.next_actions.meta.numpy().tobytes()
        assert torch.equal(device.states.index.cpu(), host.next_actions.states.index)


def test_a_batch_staged_in_one_pinned_block_reaches_the_gpu_as_the_per_tensor_copy_does():
    """The prefetcher's way (one pinned buffer, one transfer, :class:`Stager`) and the per-tensor pinned
    copies give the same batch on the GPU; so does a prefetcher fed host batches."""
    import dataclasses

    from phylorl.agent.prefetch import Prefetcher
    from phylorl.agent.transfer import Stager
    from phylorl.nets.inputs import move_to

    def same(a, b):
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if dataclasses.is_dataclass(x):
                same(x, y)
            elif isinstance(x, torch.Tensor):
                assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), field.name
            else:
                assert x == y, field.name

    compact, _ = collate_records(_records())
    reference = move_to(on_device(compact, "cuda", pin_memory=True), "cpu")
    stager = Stager(pinned=True)
    staged = on_device(compact, "cuda", stager=stager)
    torch.cuda.synchronize()
    assert staged.reward.is_cuda and stager.stage(compact).data.is_pinned()
    same(reference, move_to(staged, "cpu"))
    with Prefetcher(lambda: (compact, "keys"), "cuda", depth=2, workers=2) as prefetcher:
        for _ in range(4):
            batch, info = prefetcher.get(timeout=60)
            assert info == "keys"
            same(reference, move_to(batch, "cpu"))
