"""Chains of torch operations run as one call (TorchScript) give what the plain functions give, and a function
TorchScript cannot compile runs as written, with a warning."""

from __future__ import annotations

import threading

import pytest
import torch

from phylorl.agent.transfer import Stager, storages
from phylorl.nets.one_call import one_call


def _plain_views(buffer, where):
    return [buffer[at : at + n * dtype.itemsize].view(dtype).view(shape) for at, n, dtype, shape in where]


def test_a_block_unpacks_to_the_views_made_one_by_one():
    obj = {
        "a": torch.arange(7, dtype=torch.int64),
        "b": torch.rand(3, 5),
        "c": torch.tensor([True, False]),
        "d": torch.zeros(0, 4, dtype=torch.int32),
        "e": torch.tensor(1.5, dtype=torch.float64),
    }
    block = Stager().stage(obj)
    back = block.unpack()
    where = [(at, int(torch.Size(shape).numel()), dtype, shape) for at, dtype, shape in block.packed.tensors]
    for view, plain in zip((back[k] for k in "abcde"), _plain_views(block.data, where)):
        assert view.dtype == plain.dtype and view.shape == plain.shape and view.data_ptr() == plain.data_ptr()
        assert view.stride() == plain.stride()
    assert all(torch.equal(back[k], obj[k]) for k in obj)


def test_a_function_torchscript_cannot_compile_runs_as_written_with_a_warning():
    def doubled(x: torch.Tensor, **extra) -> torch.Tensor:  # (**kwargs: not TorchScript)
        return x * 2

    with pytest.warns(RuntimeWarning, match="TorchScript cannot compile .*doubled.* one call at a time"):
        fn = one_call(doubled)
    assert fn is doubled and torch.equal(fn(torch.ones(2)), torch.full((2,), 2.0))


def test_a_compiled_function_is_one_call_and_safe_from_several_threads():
    def chain(x: torch.Tensor) -> torch.Tensor:
        return (x + 1).mul(3).cumsum(0)

    fn = one_call(chain)
    assert fn is not chain
    results, inputs = {}, [torch.arange(1000, dtype=torch.float64) * i for i in range(8)]

    def work(i):
        for _ in range(50):
            results[i] = fn(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(results[i], chain(inputs[i])) for i in range(8))


def test_storages_gives_one_tensor_per_memory_block():
    base = torch.arange(20.0)
    other = torch.ones(3)
    obj = ((base[:5], base[5:].view(3, 5), base.view(4, 5)), [other, other[1:]])
    found = storages(obj)
    assert len(found) == 2
    assert {t.untyped_storage().data_ptr() for t in found} == {base.data_ptr(), other.data_ptr()}
