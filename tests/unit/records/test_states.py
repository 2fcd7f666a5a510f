"""The inference request's compiled pass refuses what the endpoint must not answer, and the finiteness check
it uses.

(That it equals the oracle bit for bit: ``tests/unit/records/test_collate.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.phylo.simulate import simulate_dataset
from phylorl.records.codec import encode_observation
from phylorl.records.collate import collate_states
from phylorl.records.format import PackedRecords
from phylorl.records.moves import all_finite
from phylorl.records.reader import array_header, observation_header


@pytest.fixture(scope="module")
def states() -> list[bytes]:
    alignment = simulate_dataset(12, 300, np.random.default_rng(3)).alignment
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "a")],
        EnvConfig(horizon=6),
        seed=3,
    )
    obs, _ = env.reset()
    out = [encode_observation(obs)]
    for action in (0, 5, 9):
        obs = env.step(action)[0]
        out.append(encode_observation(obs))
    return out


def _with_float(record: bytes, array: int, element: int, value: float) -> bytes:
    """``record`` (an observation record) with element ``element`` of its tree's array ``array`` (2: branch
    lengths, 5: split support; stored plain float32) set to ``value``."""
    buf, arrays = np.frombuffer(record, np.uint8), np.zeros(6, np.int64)
    assert observation_header(buf, 5, len(buf), arrays)[0]
    header = array_header(buf, arrays[array], len(buf))
    assert header[0] == header[2] == 10 and header[1] == 0  # float32, stored as it is
    out = bytearray(record)
    at = int(header[6]) + 4 * element
    out[at : at + 4] = np.float32(value).tobytes()
    return bytes(out)


@pytest.mark.parametrize("array, value", [(2, np.nan), (2, np.inf), (5, -np.inf), (5, np.nan)])
def test_a_state_with_a_non_finite_value_is_refused(states, array, value):
    bad = _with_float(states[1], array, 3, value)
    collate_states(PackedRecords.from_records(states))
    for batch in ([bad], states[:1] + [bad] + states[2:]):
        with pytest.raises(ValueError, match="NaN or infinite"):
            collate_states(PackedRecords.from_records(batch))


def test_a_finite_change_is_still_read(states):
    changed = _with_float(states[1], 2, 3, 0.25)
    graphs, actions, rich = collate_states(PackedRecords.from_records([changed]))
    assert rich and graphs.num_graphs == 1 and actions.states.count == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_finite_finds_any_non_finite_value_at_any_position(dtype):
    rng = np.random.default_rng(0)
    info = np.finfo(dtype)
    finite = [0.0, -0.0, info.max, -info.max, info.tiny, info.tiny / 4, 1.0]  # the extremes, a subnormal
    for size in (1, 7, 8, 9, 33, 100):
        values = rng.normal(size=size).astype(dtype)
        values[rng.integers(size)] = finite[size % len(finite)]
        assert all_finite(values)
        assert all_finite(values.reshape(-1, 1))
        for bad in (np.nan, np.inf, -np.inf):
            for position in {0, size // 2, size - 1}:
                damaged = values.copy()
                damaged[position] = bad
                assert not all_finite(damaged), (size, bad, position)
    assert all_finite(np.zeros((0, 3), dtype))
