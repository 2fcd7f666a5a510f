"""One-pass assembly of the endpoint's batches equals concatenating, padding and staging them, bit for bit and
layout for layout (the same block a captured graph was captured for)."""

import numpy as np
import pytest
import torch

from phylorl.agent.acting_graphs import pad_states
from phylorl.agent.batch_transfer import Stager
from phylorl.agent.request_batch import assemble
from phylorl.env.tree_observation import build_observation
from phylorl.nets.inputs import collate_observations, concat_inputs, map_tensors
from phylorl.phylo import enumerate_moves, move_metadata, random_tree


def _requests(sizes_per_request, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for sizes in sizes_per_request:
        observations = []
        for n in sizes:
            tree = random_tree([f"t{i}" for i in range(n)], rng)
            moves = enumerate_moves(tree)
            observations.append(build_observation(tree, moves, move_metadata(tree, moves)))
        out.append(collate_observations(observations))
    return out


def _flat(obj) -> list:
    found = []
    map_tensors(obj, lambda t: found.append(t) or t)
    return found


@pytest.mark.parametrize("sizes, count", [
    ([[9, 12], [7], [12, 12, 10]], 8),   # mixed sizes, padded with 2 copies
    ([[20, 20, 20, 20], [20, 20, 20, 20]], 8),  # the design size, uniform, no padding
    ([[20, 20, 20, 20]] * 3, 16),  # uniform, padded
    ([[6]], 1),
    ([[8, 11]], 5),
])
def test_assembly_equals_concatenating_padding_and_staging(sizes, count):
    parts = _requests(sizes)
    want = Stager().stage(pad_states(*concat_inputs(parts), count))
    stager = Stager()
    for _ in range(2):  # the second time into the views made the first time
        got = assemble(parts, count, stager)
        assert got.packed == want.packed
        for g, w in zip(_flat(got.unpack()), _flat(want.unpack())):
            assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)


def test_a_batch_smaller_than_its_states_is_refused():
    with pytest.raises(ValueError, match="cannot assemble 3 states into a batch of 2"):
        assemble(_requests([[8, 9, 10]]), 2, Stager())
