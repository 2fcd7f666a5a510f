"""One-pass assembly of the endpoint's batches equals staging all the requests' observations collated at once, the
last one repeated to fill the batch: bit for bit and layout for layout (the same block a captured graph was
captured for)."""

import numpy as np
import pytest
import torch

from phylorl.agent.batch_transfer import Stager
from phylorl.agent.request_batch import assemble
from phylorl.nets.inputs import collate_observations, map_tensors
from phylorl.nets.synthetic import random_observation


def _requests(sizes_per_request, seed=0):
    """Each request's observations."""
    rng = np.random.default_rng(seed)
    return [[random_observation(n, rng) for n in sizes] for sizes in sizes_per_request]


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
def test_assembly_equals_collating_everything_at_once_with_the_last_state_repeated(sizes, count):
    requests = _requests(sizes)
    parts = [collate_observations(r) for r in requests]
    everything = [o for r in requests for o in r]
    want = Stager().stage(collate_observations(everything + [everything[-1]] * (count - len(everything))))
    stager = Stager()
    for _ in range(2):  # the second time into the views made the first time
        got = assemble(parts, count, stager)
        assert got.packed == want.packed
        for g, w in zip(_flat(got.unpack()), _flat(want.unpack())):
            assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)


def test_a_batch_smaller_than_its_states_is_refused():
    with pytest.raises(ValueError, match="cannot assemble 3 states into a batch of 2"):
        assemble([collate_observations(r) for r in _requests([[8, 9, 10]])], 2, Stager())
