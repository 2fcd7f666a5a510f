"""A batch written into a flat buffer and read back (the learner's feed processes) is the same, bit for bit."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from phylorl.agent.batch import collate, on_device
from phylorl.agent.batch_transfer import ALIGN, Stager, pack, packed_size, unpack
from phylorl.agent.packed_batch import collate_records
from phylorl.env.config import EnvConfig
from phylorl.phylo.simulate import simulate_dataset
from phylorl.wire.codec import PackedRecords
from phylorl.wire.record import decode_transition

sys.path.insert(0, str(Path(__file__).parent))
from test_packed_batch import _assert_same, _episodes  # noqa: E402  (same directory)


@pytest.mark.parametrize("form", ["compact", "reference"])
def test_a_packed_batch_reads_back_the_same_bits(form):
    alignment = simulate_dataset(9, 200, np.random.default_rng(4)).alignment
    records = _episodes(alignment, EnvConfig(horizon=6, features="rich"), 12, seed=5, labels=True)
    weights = np.linspace(0.5, 1.0, len(records)).astype(np.float32)
    if form == "compact":
        batch, _ = collate_records(PackedRecords.from_records(records), weights=weights, compact=True)
    else:
        batch = collate([decode_transition(r) for r in records], "cpu", weights)
    sized = packed_size(batch)
    buffer = torch.full((sized[2] + 3 * ALIGN,), 0xAB, dtype=torch.uint8)
    packed = pack(batch, buffer, sized)
    assert packed.nbytes == sized[2] and all(at % ALIGN == 0 for at, _, _ in packed.tensors)
    back = unpack(packed, buffer)
    _assert_same(batch, back)
    assert back.reward.data_ptr() != batch.reward.data_ptr()  # views of the buffer, not the originals
    buffer.zero_()  # the views are the buffer: what is read back changes with it
    assert not back.weights.any()


def test_bool_empty_scalar_and_numpy_less_tensors_round_trip_and_a_small_buffer_is_refused():
    obj = {"flags": (torch.tensor([True, False, True]), torch.zeros(0, 4, dtype=torch.int64)),
           "scalar": torch.tensor(2.5, dtype=torch.float64), "plain": 7,
           "strided": torch.arange(12, dtype=torch.int32).reshape(3, 4).t(),
           "bf16": torch.linspace(-3, 3, 10, dtype=torch.bfloat16).reshape(2, 5).t(),  # numpy has no bfloat16
           "half": torch.linspace(-1, 1, 6, dtype=torch.float16),
           "grad": torch.linspace(0, 1, 4, requires_grad=True)}
    _, _, nbytes = packed_size(obj)
    buffer = torch.empty(nbytes, dtype=torch.uint8)
    back = unpack(pack(obj, buffer), buffer)
    assert back["plain"] == 7 and back["scalar"].dtype == torch.float64 and float(back["scalar"]) == 2.5
    assert back["flags"][0].tolist() == [True, False, True] and back["flags"][1].shape == (0, 4)
    assert torch.equal(back["strided"], obj["strided"])
    for name in ("bf16", "half", "grad"):
        assert back[name].dtype == obj[name].dtype and torch.equal(back[name], obj[name].detach()), name
    with pytest.raises(ValueError, match="only CPU tensors are packed, got one on meta"):
        pack({"elsewhere": torch.empty(3, device="meta")}, buffer)
    with pytest.raises(ValueError, match=f"needs {nbytes} bytes, the buffer holds {nbytes - 1}"):
        pack(obj, torch.empty(nbytes - 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match="flat uint8"):
        pack(obj, torch.empty(nbytes, dtype=torch.float32))


def test_a_block_goes_to_a_device_as_one_copy_and_on_device_takes_blocks_and_stagers():
    alignment = simulate_dataset(8, 150, np.random.default_rng(6)).alignment
    records = _episodes(alignment, EnvConfig(horizon=5, features="rich"), 10, seed=2)
    batch, _ = collate_records(PackedRecords.from_records(records), compact=True)
    stager = Stager(pinned=False)
    block = stager.stage(batch)
    _assert_same(batch, block.unpack())
    expected = on_device(batch, "cpu")  # compact moves expanded on the host
    _assert_same(expected, block.to("cpu"))  # ... and by the device's tensor operations: the same bits
    _assert_same(expected, on_device(block, "cpu"))
    _assert_same(expected, on_device(batch, "cpu", stager=stager))
    bigger = collate_records(PackedRecords.from_records(records * 3), compact=True)[0]
    grown = stager.stage(bigger)  # the staging buffer grows for a larger batch
    assert grown.data.numel() >= grown.packed.nbytes > block.packed.nbytes
    _assert_same(bigger, grown.unpack())
