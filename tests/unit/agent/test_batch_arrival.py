"""A packed batch brought to a device in one call (agent/batch_arrival.py) is the batch with its moves expanded, bit
for bit; the layout keeps each element type's tensors in one run; the compiled functions keep their arguments."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from phylorl.agent.batch_arrival import COMPACT_TENSORS, _arrival, arrive
from phylorl.agent.batch_transfer import Block, Plan, Stager, _views, aligned, packed_size
from phylorl.agent.packed_batch import collate_records
from phylorl.env.config import EnvConfig
from phylorl.nets.compact_actions import CompactActions, _expansion, expand_actions
from phylorl.nets.inputs import ActionBatch
from phylorl.phylo.simulate import simulate_dataset
from phylorl.wire.codec import PackedRecords

sys.path.insert(0, str(Path(__file__).parent))
from test_packed_batch import _assert_same, _episodes  # noqa: E402  (same directory)

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def compact():
    alignment = simulate_dataset(9, 180, np.random.default_rng(11)).alignment
    records = _episodes(alignment, EnvConfig(horizon=6, features="rich"), 14, seed=3, labels=True)
    weights = np.linspace(0.25, 1.0, len(records)).astype(np.float32)
    return collate_records(PackedRecords.from_records(records), weights=weights, compact=True)[0]


def _expanded(batch):
    return dataclasses.replace(batch, next_actions=expand_actions(batch.next_actions))


def test_a_staged_batch_arrives_with_its_moves_expanded_bit_for_bit(compact):
    assert isinstance(compact.next_actions, CompactActions)
    stager = Stager()
    for _ in range(2):  # the second time from the stager's views per element type, made once
        block = stager.stage(compact)
        arrived = arrive(block, CPU)
        assert isinstance(arrived.next_actions, ActionBatch)
        _assert_same(_expanded(compact), arrived)
        assert set(block.typed) == {t.dtype for t in packed_size(compact)[1]}
    assert block.to("cpu").next_actions.states.size == compact.next_actions.uniform


@pytest.mark.parametrize("extra", [0, 3])
def test_a_block_without_a_stager_arrives_the_same(compact, extra):
    """A feed process's block: a buffer of its own (sized to the bytes, or not a whole number of every type's)."""
    staged = Stager().stage(compact)
    n = staged.packed.nbytes
    data = torch.empty(aligned(n) + extra, dtype=torch.uint8)
    data[:n] = staged.data[:n]
    _assert_same(_expanded(compact), arrive(Block(staged.packed, data), CPU))


def test_objects_without_compact_moves_arrive_as_they_unpack():
    obj = {"a": torch.arange(9, dtype=torch.int64).reshape(3, 3), "b": (torch.rand(4), torch.tensor([True, False])),
           "c": torch.zeros(0, 2, dtype=torch.int32), "n": 5}
    block = Stager().stage(obj)
    back = arrive(block, CPU)
    assert back["n"] == 5 and back["c"].shape == (0, 2)
    for got, want in ((back["a"], obj["a"]), (back["b"][0], obj["b"][0]), (back["b"][1], obj["b"][1])):
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_each_element_type_lies_in_one_run_of_the_buffer(compact):
    block = Stager().stage(compact)
    plan = Plan.of(block.packed)
    runs = []
    for k, kind in enumerate(plan.kinds):
        first, elements = plan.span[k]
        lo, hi = first * kind.itemsize, (first + elements) * kind.itemsize
        members = [(at, at + np.prod(shape, dtype=np.int64) * kind.itemsize)
                   for at, dtype, shape in block.packed.tensors if dtype == kind]
        assert lo == min(a for a, _ in members) and hi == max(b for _, b in members)
        runs.append((lo, hi))
    runs.sort()
    assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:]))  # the runs do not overlap
    assert runs[-1][1] == block.packed.nbytes == packed_size(compact)[2]


def test_the_compiled_functions_return_their_tensor_arguments(compact):
    """Kept to the end of the call: the interpreter would drop each as it was last used, and each drop of a tensor
    Python holds takes the interpreter lock (phylorl/nets/one_call.py)."""
    block = Stager().stage(compact)
    plan = Plan.of(block.packed)
    host = block.typed_views(plan.kinds)
    for fn in (_arrival(), _expansion(), _views()):
        assert isinstance(fn, torch.jit.ScriptFunction)
    kept = _arrival()(host, [f for f, _ in plan.span], [n for _, n in plan.span], plan.which, plan.in_run,
                      plan.count, plan.shapes, [], 0, CPU, False, None)[2]
    assert [t.data_ptr() for t in kept] == [t.data_ptr() for t in host]
    c = compact.next_actions
    inputs = [getattr(c, name) for name in COMPACT_TENSORS]
    kept = _expansion()(*inputs, c.count)[3]
    assert [t.data_ptr() for t in kept] == [t.data_ptr() for t in inputs]
    assert [t.data_ptr() for t in _views()(host, plan.which, plan.start, plan.count, plan.shapes)[1]] == \
        [t.data_ptr() for t in host]


def test_the_consumers_stream_is_marked_inside_the_one_call(compact):
    """A stream reaches the compiled function and every block of the result is marked for it there (on the host
    torch has no ``record_stream``: the call fails at the marking, which shows it happens inside)."""
    block = Stager().stage(compact)
    with pytest.raises(RuntimeError, match="record_stream"):
        arrive(block, CPU, consumer=torch.Stream(device="cpu"))
    _assert_same(_expanded(compact), arrive(block, CPU, consumer=None))


def test_a_feed_processs_bytes_copied_into_a_stagers_buffer_arrive_the_same(compact):
    """A GPU learner's feed copies each batch from the feed process's buffer into its thread's one staging buffer
    (services/learner/feed.py): a block of that buffer, with the buffer's views per element type made once."""
    shared = Stager().stage(compact)  # stands for the feed process's shared buffer
    stager = Stager()
    first = stager.copy(shared.packed, shared.data)
    _assert_same(_expanded(compact), arrive(first, CPU))
    second = stager.copy(shared.packed, shared.data)
    assert second.data is first.data and second.typed is first.typed  # the same buffer and views, written again
    _assert_same(_expanded(compact), arrive(second, CPU))
