"""Records of observations and transitions: exact round trips, size, the taken row, corrupt input."""

import dataclasses
import struct

import numpy as np
import pytest
from helpers import assert_same_observation, assert_same_transition
from oracles.features import observation_arrays
from oracles.records import decode_array, decode_observation, decode_transition

from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.phylo.simulate import simulate_dataset
from phylorl.records.arrays import encode_array, encode_row
from phylorl.records.codec import encode_observation, encode_transition
from phylorl.types import Transition

_ENVS: dict = {}


def env_transition(n_taxa: int, seed: int, radius=None, features: str = "rich") -> Transition:
    """A transition of the real environment on a simulated alignment of ``n_taxa`` taxa."""
    key = (n_taxa, radius, features)
    if key not in _ENVS:
        alignment = simulate_dataset(n_taxa, 300, np.random.default_rng(n_taxa)).alignment
        entry = EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "a")
        _ENVS[key] = TreeEnv([entry], EnvConfig(radius=radius, features=features, horizon=100), seed=seed)
    env = _ENVS[key]
    obs, _ = env.reset()
    rng = np.random.default_rng(seed)
    action = int(rng.integers(obs.n_actions))
    nxt, reward, _, _, _ = env.step(action)
    return Transition(
        obs, action, reward, nxt, terminal=False, truncated=True, discount=0.99, policy_version=7
    )


@pytest.mark.parametrize("features", ["rich", "basic"])
def test_a_20_taxon_transition_round_trips_exactly_in_a_few_kilobytes(features):
    t = env_transition(20, seed=0, features=features)
    data = encode_transition(t)
    back = decode_transition(data)
    assert_same_transition(back, t)
    assert t.obs.n_actions == 1122
    assert len(data) < (4_500 if features == "rich" else 2_000)  # the moves and their features: ~200 kB
    assert encode_transition(back) == data
    for obs in (back.obs, back.next_obs):
        assert obs.neighbors.flags.writeable and obs.moves.flags.writeable


@pytest.mark.parametrize("n_taxa, radius", [(20, 3), (5, None), (60, None), (4, 1)])
def test_radius_and_sizes_round_trip(n_taxa, radius):
    t = env_transition(n_taxa, seed=n_taxa, radius=radius)
    back = decode_transition(encode_transition(t))
    assert_same_transition(back, t)
    assert back.obs.radius == (-1 if radius is None else radius)


def test_an_observation_record_round_trips():
    obs = env_transition(12, seed=3).next_obs
    data = encode_observation(obs)
    assert data[:4] == b"PRLO"
    assert_same_observation(decode_observation(data), obs)


@pytest.mark.parametrize("features", ["rich", "basic"])
def test_the_taken_row_is_the_move_and_its_features_as_the_network_reads_them(features):
    for seed in range(5):
        t = env_transition(12, seed=seed, features=features)
        data = encode_transition(t)
        assert data[5] & 8  # flag bit 3: the taken row
        width = 15 if features == "rich" else 3
        nodes, end = decode_array(memoryview(data), len(data) - (4 + 4 + 4 * width) - (4 + 4 + 4))
        meta, _ = decode_array(memoryview(data), end)
        reference = observation_arrays(t.obs)
        assert nodes.tobytes() == reference["actions"][t.action].tobytes()
        assert meta.tobytes() == reference["action_meta"][t.action].tobytes()


def test_the_taken_row_is_checked_against_the_state():
    t = env_transition(12, seed=5)
    data = encode_transition(t)
    corrupt = bytearray(data)
    corrupt[-1] ^= 1  # the last feature's exponent: another finite value
    with pytest.raises(ValueError, match=f"taken move's features are not those of move {t.action} of its"):
        decode_transition(bytes(corrupt))
    corrupt = bytearray(data)
    corrupt[-4 * 15 - 8 - 4] ^= 1  # the first node id
    with pytest.raises(ValueError, match="taken move's node ids"):
        decode_transition(bytes(corrupt))
    corrupt = bytearray(data)
    corrupt[6:14] = struct.pack("<q", t.obs.n_actions)
    with pytest.raises(ValueError, match="not one of the state's"):
        decode_transition(bytes(corrupt))
    for action in (-1, t.obs.n_actions):
        with pytest.raises(ValueError, match="not one of the state's"):
            encode_transition(dataclasses.replace(t, action=action))


def test_header_layout_and_scalars():
    t = dataclasses.replace(
        env_transition(6, seed=1),
        reward=0.1 + 0.2,
        discount=0.99**7,
        terminal=True,
        truncated=True,
        policy_version=42,
    )
    data = encode_transition(t)
    assert struct.unpack_from("<4sBBqddq", data) == (b"PRLT", 5, 1 | 2 | 8, t.action, 0.1 + 0.2, 0.99**7, 42)
    back = decode_transition(data)
    assert (back.reward, back.discount, back.terminal, back.truncated, back.policy_version) == (
        0.1 + 0.2,
        0.99**7,
        True,
        True,
        42,
    )


def test_corrupt_records_raise_clear_errors():
    data = encode_transition(env_transition(5, seed=3))
    with pytest.raises(ValueError, match="magic"):
        decode_transition(b"XXXX" + data[4:])
    with pytest.raises(ValueError, match="format version 9; this code reads version 5"):
        decode_transition(data[:4] + b"\x09" + data[5:])
    with pytest.raises(ValueError, match="truncated"):
        decode_transition(data[:-3])
    with pytest.raises(ValueError, match="2 trailing bytes"):
        decode_transition(data + b"\0\0")
    with pytest.raises(ValueError, match="too short"):
        decode_transition(data[:10])
    corrupt = bytearray(data)
    corrupt[struct.calcsize("<4sBBqddq")] = 7
    with pytest.raises(ValueError, match="unknown state form 7"):
        decode_transition(bytes(corrupt))


def test_a_stored_tree_that_is_not_a_binary_tree_is_named():
    t = env_transition(8, seed=5, features="basic")
    data = bytearray(encode_transition(t))
    # the first state's neighbour table starts after header, form byte, tree header and array header with 2
    # axes
    start = struct.calcsize("<4sBBqddq") + 1 + struct.calcsize("<IiB") + 4 + 2 * 4
    data[start + 3 * 8] = 0  # node 8 (the first internal node) now names node 0 as its first neighbour twice
    data[start + 3 * 8 + 1] = 0
    with pytest.raises(ValueError, match="not an unrooted binary tree"):
        decode_transition(bytes(data))


def test_demonstration_labels_round_trip_and_are_checked():
    t = env_transition(12, seed=4)
    t.next_labels = np.random.default_rng(0).normal(size=t.next_obs.n_actions).astype(np.float32)
    data = encode_transition(t)
    back = decode_transition(data)
    assert back.next_labels.dtype == np.float32 and back.next_labels.tobytes() == t.next_labels.tobytes()
    assert decode_transition(encode_transition(dataclasses.replace(t, next_labels=None))).next_labels is None
    with pytest.raises(ValueError, match="one per move of next_obs"):
        encode_transition(dataclasses.replace(t, next_labels=t.next_labels[:-1]))
    with pytest.raises(ValueError, match="one per move of next_obs"):
        encode_transition(dataclasses.replace(t, next_labels=t.next_labels.astype(np.float64)))
    corrupt = bytearray(data)
    corrupt[5] &= ~4  # flags: without bit 2 the labels are trailing bytes
    with pytest.raises(ValueError, match="trailing bytes"):
        decode_transition(bytes(corrupt))


@pytest.mark.parametrize(
    "array",
    [
        np.array([-3, 0, 127], dtype=np.int64),  # signed narrowing to int8
        np.array([0, 70_000], dtype=np.int64),  # needs 32 bits
        np.array([-(2**40), 2**40], dtype=np.int64),  # needs all 64 bits
        np.arange(300, dtype=np.int32).reshape(3, 100),
        np.array([2**63 + 5], dtype=np.uint64),
        np.array([True, False, True]),
        np.linspace(0, 1, 1000, dtype=np.float32).reshape(10, 100),  # 1000 distinct: uint16 dictionary
        np.random.default_rng(2).normal(size=(70_000,)).astype(np.float32),  # too many distinct: stored raw
        np.tile(np.array([0.1, -0.0, 0.0, np.nan, np.inf], dtype=np.float64), 100),
        np.tile(np.array([0x7FC00001, 0x7FC00002, 0x80000000, 0], dtype=np.uint32).view(np.float32), 100),
        np.ones((2, 3, 4, 5), dtype=np.float16),
        np.float32(7.0) * np.ones((), np.float32),
    ],
)
def test_an_array_round_trips_bit_for_bit(array):
    parts = []
    encode_array(array, "array", parts)
    got, end = decode_array(memoryview(b"".join(parts)), 0)
    assert end == len(b"".join(parts))
    assert got.dtype == array.dtype and got.shape == array.shape and got.tobytes() == array.tobytes()


def test_an_unsupported_dtype_is_named():
    with pytest.raises(ValueError, match=r"moves: dtype complex64"):
        encode_array(np.zeros((2, 4), np.complex64), "moves", [])


@pytest.mark.parametrize(
    "row",
    [
        np.array([3, 0, 255, 17]),
        np.array([3, 0, 256, 17]),
        np.array([-1, 2]),
        np.array([], np.int64),
        np.arange(4, dtype=np.int32),
        np.arange(15, dtype=np.float32) / 7,
        np.array([np.nan, -0.0], np.float32),
        np.arange(4, dtype=">i8"),
        np.arange(3, dtype=">f4"),
        np.arange(300, dtype=np.float32),
        np.arange(8.0)[::2],
    ],
)
def test_a_row_is_stored_as_any_array_is(row):
    fast, general = [], []
    encode_row(row, "row", fast)
    encode_array(row, "row", general)
    assert b"".join(fast) == b"".join(general)
    back, _ = decode_array(memoryview(b"".join(fast)), 0)
    assert back.tobytes() == np.ascontiguousarray(row).astype(back.dtype).tobytes()


def test_state_sections_encode_each_observation_once_and_give_the_same_records():
    """A producer's state sections: the same bytes as encoding each record whole, one encoding per observation
    object, the oldest dropped beyond the capacity; an observation is not changed by the steps after it (the
    sections of an episode's states read the same after the episode as when each was made)."""
    from phylorl.records.codec import StateSections, encode_state

    alignment = simulate_dataset(9, 300, np.random.default_rng(4)).alignment
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "sim")],
        EnvConfig(horizon=20),
        seed=2,
    )
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    observations, made, transitions = [obs], [encode_state(obs)], []
    for _ in range(6):
        action = int(rng.integers(obs.n_actions))
        nxt, reward, terminal, truncated, _ = env.step(action)
        transitions.append(Transition(obs, action, reward, nxt, terminal, truncated, 0.99, policy_version=1))
        observations.append(nxt)
        made.append(encode_state(nxt))
        obs = nxt
    assert [encode_state(o) for o in observations] == made  # unchanged by the later steps
    sections = StateSections(capacity=3)
    for t in transitions:
        assert encode_observation(t.next_obs, sections(t.next_obs)) == encode_observation(t.next_obs)
        assert encode_transition(t, sections(t.obs), sections(t.next_obs)) == encode_transition(t)
    assert len(sections) == 3
    kept = sections(observations[-1])
    assert sections(observations[-1]) is kept  # encoded once
    # dropped, made again
    assert sections(observations[0]) is not made[0] and sections(observations[0]) == made[0]
    with pytest.raises(ValueError, match="capacity"):
        StateSections(0)
