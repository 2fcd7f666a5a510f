"""A learner batch onto its device (agent/transfer.py): packed into one buffer and read back bit for bit, each
element type in one run, brought to a device in one call with its moves expanded; an update's results back in
one call."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import assert_same, episodes

from phylorl.agent.transfer import (
    ALIGN,
    Block,
    Plan,
    Stager,
    _arrival,
    aligned,
    arrive,
    on_device,
    pack,
    packed_size,
    unpack,
)
from phylorl.env.config import EnvConfig
from phylorl.nets.compact_actions import TENSORS, CompactActions, _expansion, expand_actions
from phylorl.nets.inputs import ActionBatch
from phylorl.phylo.simulate import simulate_dataset
from phylorl.records.collate import collate_records
from phylorl.records.format import PackedRecords


@pytest.mark.parametrize("form", ["compact", "expanded"])
def test_a_packed_batch_reads_back_the_same_bits(form):
    alignment = simulate_dataset(9, 200, np.random.default_rng(4)).alignment
    records = episodes(alignment, EnvConfig(horizon=6, features="rich"), 12, seed=5, labels=True)
    weights = np.linspace(0.5, 1.0, len(records)).astype(np.float32)
    batch, _ = collate_records(PackedRecords.from_records(records), weights)
    if form == "expanded":
        batch = on_device(batch, "cpu")
    sized = packed_size(batch)
    buffer = torch.full((sized[2] + 3 * ALIGN,), 0xAB, dtype=torch.uint8)
    packed = pack(batch, buffer, sized)
    assert packed.nbytes == sized[2] and all(at % ALIGN == 0 for at, _, _ in packed.tensors)
    back = unpack(packed, buffer)
    assert_same(batch, back)
    assert back.reward.data_ptr() != batch.reward.data_ptr()  # views of the buffer, not the originals
    buffer.zero_()  # the views are the buffer: what is read back changes with it
    assert not back.weights.any()


def test_bool_empty_scalar_and_strided_tensors_round_trip_and_a_small_buffer_is_refused():
    obj = {
        "flags": (torch.tensor([True, False, True]), torch.zeros(0, 4, dtype=torch.int64)),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "plain": 7,
        "strided": torch.arange(12, dtype=torch.int32).reshape(3, 4).t(),
        "half": torch.linspace(-1, 1, 6, dtype=torch.float16),
        "grad": torch.linspace(0, 1, 4, requires_grad=True),
    }
    _, _, nbytes = packed_size(obj)
    buffer = torch.empty(nbytes, dtype=torch.uint8)
    back = unpack(pack(obj, buffer), buffer)
    assert back["plain"] == 7 and back["scalar"].dtype == torch.float64 and float(back["scalar"]) == 2.5
    assert back["flags"][0].tolist() == [True, False, True] and back["flags"][1].shape == (0, 4)
    assert torch.equal(back["strided"], obj["strided"])
    for name in ("half", "grad"):
        assert back[name].dtype == obj[name].dtype and torch.equal(back[name], obj[name].detach()), name
    with pytest.raises(ValueError, match="only CPU tensors are packed, got one on meta"):
        pack({"elsewhere": torch.empty(3, device="meta")}, buffer)
    with pytest.raises(ValueError, match=f"needs {nbytes} bytes, the buffer holds {nbytes - 1}"):
        pack(obj, torch.empty(nbytes - 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match="flat uint8"):
        pack(obj, torch.empty(nbytes, dtype=torch.float32))


def test_a_block_goes_to_a_device_as_one_copy_and_on_device_takes_blocks_and_stagers():
    alignment = simulate_dataset(8, 150, np.random.default_rng(6)).alignment
    records = episodes(alignment, EnvConfig(horizon=5, features="rich"), 10, seed=2)
    batch, _ = collate_records(PackedRecords.from_records(records))
    stager = Stager(pinned=False)
    block = stager.stage(batch)
    assert_same(batch, block.unpack())
    expected = on_device(batch, "cpu")  # compact moves expanded on the host
    assert_same(expected, block.to("cpu"))  # ... and by the device's tensor operations: the same bits
    assert_same(expected, on_device(block, "cpu"))
    assert_same(expected, on_device(batch, "cpu", stager=stager))
    bigger = collate_records(PackedRecords.from_records(records * 3))[0]
    grown = stager.stage(bigger)  # the staging buffer grows for a larger batch
    assert grown.data.numel() >= grown.packed.nbytes > block.packed.nbytes
    assert_same(bigger, grown.unpack())


CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def compact():
    alignment = simulate_dataset(9, 180, np.random.default_rng(11)).alignment
    records = episodes(alignment, EnvConfig(horizon=6, features="rich"), 14, seed=3, labels=True)
    weights = np.linspace(0.25, 1.0, len(records)).astype(np.float32)
    return collate_records(PackedRecords.from_records(records), weights)[0]


def _expanded(batch):
    return dataclasses.replace(batch, next_actions=expand_actions(batch.next_actions))


def test_a_staged_batch_arrives_with_its_moves_expanded_bit_for_bit(compact):
    assert isinstance(compact.next_actions, CompactActions)
    stager = Stager()
    for _ in range(2):  # the second time from the stager's views per element type, made once
        block = stager.stage(compact)
        arrived = arrive(block, CPU)
        assert isinstance(arrived.next_actions, ActionBatch)
        assert_same(_expanded(compact), arrived)
        assert set(block.typed) == {t.dtype for t in packed_size(compact)[1]}
    assert block.to("cpu").next_actions.states.size == compact.next_actions.uniform


@pytest.mark.parametrize("extra", [0, 3])
def test_a_block_without_a_stager_arrives_the_same(compact, extra):
    """A block of a buffer of its own (sized to the bytes, or not a whole number of every type's)."""
    staged = Stager().stage(compact)
    n = staged.packed.nbytes
    data = torch.empty(aligned(n) + extra, dtype=torch.uint8)
    data[:n] = staged.data[:n]
    assert_same(_expanded(compact), arrive(Block(staged.packed, data), CPU))


def test_objects_without_compact_moves_arrive_as_they_unpack():
    obj = {
        "a": torch.arange(9, dtype=torch.int64).reshape(3, 3),
        "b": (torch.rand(4), torch.tensor([True, False])),
        "c": torch.zeros(0, 2, dtype=torch.int32),
        "n": 5,
    }
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
        members = [
            (at, at + np.prod(shape, dtype=np.int64) * kind.itemsize)
            for at, dtype, shape in block.packed.tensors
            if dtype == kind
        ]
        assert lo == min(a for a, _ in members) and hi == max(b for _, b in members)
        runs.append((lo, hi))
    runs.sort()
    assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:]))  # the runs do not overlap
    assert runs[-1][1] == block.packed.nbytes == packed_size(compact)[2]


def test_the_compiled_functions_return_their_tensor_arguments(compact):
    """Kept to the end of the call: the interpreter would drop each as it was last used, and each drop of a
    tensor Python holds takes the interpreter lock (phylorl/nets/one_call.py)."""
    block = Stager().stage(compact)
    plan = Plan.of(block.packed)
    host = block.typed_views(plan.kinds)
    for fn in (_arrival(), _expansion()):
        assert isinstance(fn, torch.jit.ScriptFunction)
    kept = _arrival()(
        host,
        [f for f, _ in plan.span],
        [n for _, n in plan.span],
        plan.which,
        plan.in_run,
        plan.count,
        plan.shapes,
        [],
        0,
        CPU,
        False,
        None,
    )[2]
    assert [t.data_ptr() for t in kept] == [t.data_ptr() for t in host]
    c = compact.next_actions
    inputs = [getattr(c, name) for name in TENSORS]
    kept = _expansion()(inputs, c.count)[3]
    assert [t.data_ptr() for t in kept] == [t.data_ptr() for t in inputs]


def test_the_consumers_stream_is_marked_inside_the_one_call(compact):
    """A stream reaches the compiled function and every block of the result is marked for it there (on the
    host torch has no ``record_stream``: the call fails at the marking, which shows it happens inside)."""
    block = Stager().stage(compact)
    with pytest.raises(RuntimeError, match="record_stream"):
        arrive(block, CPU, consumer=torch.Stream(device="cpu"))
    assert_same(_expanded(compact), arrive(block, CPU, consumer=None))
