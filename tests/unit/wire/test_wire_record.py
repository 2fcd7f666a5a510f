"""Compact transition records: exact round trips, compactness, corrupt input."""

import dataclasses
import struct

import numpy as np
import pytest

from phylorl.types import Observation, Transition
from phylorl.wire import record
from phylorl.wire.synthetic import random_transition

from test_wire_codec import assert_same_transition  # noqa: E402  (same directory)


def test_realistic_20_taxon_round_trip_and_size():
    t = random_transition(20, 1122, np.random.default_rng(0))
    data = record.encode_transition(t)
    back = record.decode_transition(data)
    assert_same_transition(back, t)
    raw_bytes = sum(getattr(o, f).nbytes for o in (t.obs, t.next_obs) for f in record.OBS_FIELDS)
    assert raw_bytes == 2 * (38 * 4 + 2 * 74 * 8 + 74 * 4 + 1122 * 4 * 8 + 1122 * 3 * 4)
    # node indices as uint8, move metadata as a byte-indexed dictionary: about 1/6 of the raw arrays
    assert len(data) < 18_000 < raw_bytes / 5


def test_decoded_arrays_are_fresh_and_writable():
    t = random_transition(6, 40, np.random.default_rng(1))
    back = record.decode_transition(record.encode_transition(t))
    for obs in (back.obs, back.next_obs):
        for name in record.OBS_FIELDS:
            assert getattr(obs, name).flags.writeable


def _obs(**arrays: np.ndarray) -> Observation:
    base = dict(node_features=np.zeros((4, 1), np.float32), edge_index=np.zeros((2, 6), np.int64),
                edge_attr=np.zeros((6, 1), np.float32), actions=np.zeros((0, 4), np.int64),
                action_meta=np.zeros((0, 3), np.float32))
    base.update(arrays)
    return Observation(**base)


@pytest.mark.parametrize("array", [
    np.array([-3, 0, 127], dtype=np.int64),                   # signed narrowing to int8
    np.array([0, 70_000], dtype=np.int64),                     # needs 32 bits
    np.array([-(2**40), 2**40], dtype=np.int64),               # needs all 64 bits
    np.arange(300, dtype=np.int32).reshape(3, 100),
    np.array([2**63 + 5], dtype=np.uint64),
    np.array([True, False, True]),
    np.linspace(0, 1, 1000, dtype=np.float32).reshape(10, 100),   # 1000 distinct: uint16 dictionary
    np.random.default_rng(2).normal(size=(70_000,)).astype(np.float32),  # too many distinct: stored raw
    np.tile(np.array([0.1, -0.0, 0.0, np.nan, np.inf], dtype=np.float64), 100),
    np.tile(np.array([0x7FC00001, 0x7FC00002, 0x80000000, 0], dtype=np.uint32).view(np.float32), 100),
    np.ones((2, 3, 4, 5), dtype=np.float16),
    np.float32(7.0) * np.ones((), np.float32),
])
def test_round_trip_is_bit_exact_for_any_array(array):
    t = Transition(_obs(), 0, 1.5, _obs(action_meta=array), terminal=False, truncated=True, discount=0.5)
    back = record.decode_transition(record.encode_transition(t))
    got = back.next_obs.action_meta
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes() == array.tobytes()


def test_scalars_round_trip_exactly():
    t = Transition(_obs(), 2**40, 0.1 + 0.2, _obs(), terminal=True, truncated=False, discount=0.99**7)
    back = record.decode_transition(record.encode_transition(t))
    assert (back.action, back.reward, back.terminal, back.truncated, back.discount) == \
           (2**40, 0.1 + 0.2, True, False, 0.99**7)


def test_unsupported_dtype_names_the_field():
    t = Transition(_obs(), 0, 0.0, _obs(actions=np.zeros((2, 4), np.complex64)), False, False)
    with pytest.raises(ValueError, match=r"next_obs\.actions: dtype complex64"):
        record.encode_transition(t)


def test_corrupt_records_raise_clear_errors():
    data = record.encode_transition(random_transition(5, 10, np.random.default_rng(3)))
    with pytest.raises(ValueError, match="magic"):
        record.decode_transition(b"XXXX" + data[4:])
    with pytest.raises(ValueError, match="format version 9"):
        record.decode_transition(data[:4] + b"\x09" + data[5:])
    with pytest.raises(ValueError, match="truncated"):
        record.decode_transition(data[:-3])
    with pytest.raises(ValueError, match="2 trailing bytes"):
        record.decode_transition(data + b"\0\0")
    with pytest.raises(ValueError, match="too short"):
        record.decode_transition(data[:10])
    assert record.is_record(data) and not record.is_record(b"XXXX\x01")


@pytest.mark.parametrize("row", [
    np.array([3, 0, 255, 17]), np.array([3, 0, 256, 17]), np.array([-1, 2]), np.array([], np.int64),
    np.arange(4, dtype=np.int32), np.arange(15, dtype=np.float32) / 7, np.array([np.nan, -0.0], np.float32),
    np.arange(4, dtype=">i8"), np.arange(3, dtype=">f4"), np.arange(300, dtype=np.float32), np.arange(8.0)[::2],
])
def test_a_row_is_stored_as_any_array_is(row):
    from phylorl.wire.arrays import decode_array, encode_array, encode_row
    fast, general = [], []
    encode_row(row, "row", fast)
    encode_array(row, "row", general)
    assert b"".join(fast) == b"".join(general)
    back, _ = decode_array(memoryview(b"".join(fast)), 0)
    assert back.tobytes() == np.ascontiguousarray(row).astype(back.dtype).tobytes()


def test_header_layout():
    t = Transition(_obs(), 5, -2.0, _obs(), terminal=True, truncated=True, discount=0.25, policy_version=42)
    data = record.encode_transition(t)
    assert struct.unpack_from("<4sBBqddq", data) == (b"PRLT", 5, 3, 5, -2.0, 0.25, 42)  # no move 5: no taken row
    assert record.decode_transition(data).policy_version == 42


# ---------------------------------------------------------------- tree form (observations from trees)

def _env_transition(n_taxa: int, seed: int, radius=None) -> Transition:
    from phylorl.env.tree_observation import build_observation
    from phylorl.phylo import apply_spr, enumerate_moves, move_metadata, random_tree

    rng = np.random.default_rng(seed)
    tree = random_tree([f"t{i}" for i in range(n_taxa)], rng)

    def observe():
        moves = enumerate_moves(tree, radius=radius)
        return build_observation(tree, moves, move_metadata(tree, moves), radius=radius)

    obs = observe()
    action = int(rng.integers(obs.n_actions))
    apply_spr(tree, obs.actions[action])  # in place: the first observation must not change with the tree
    tree.lengths[:] = rng.exponential(0.1, size=tree.n_edges)
    return Transition(obs, action, 0.25, observe(), terminal=False, truncated=True, discount=0.99, policy_version=7)


@pytest.mark.parametrize("n_taxa, radius", [(20, None), (20, 3), (5, None), (60, None), (4, 1)])
def test_tree_form_round_trip_is_exact_and_small(n_taxa, radius):
    t = _env_transition(n_taxa, seed=n_taxa, radius=radius)
    data = record.encode_transition(t)
    back = record.decode_transition(data)
    assert_same_transition(back, t)
    assert back.policy_version == 7
    assert back.obs.source is not None and back.obs.source.radius == (-1 if radius is None else radius)
    assert record.encode_transition(back) == data  # decoded observations stay in tree form
    explicit = record.encode_transition(Transition(_drop_source(t.obs), t.action, t.reward,
                                                   _drop_source(t.next_obs), t.terminal, t.truncated))
    assert len(data) < len(explicit)
    if n_taxa == 20 and radius is None:
        assert t.obs.n_actions == 1122
        assert len(data) < 1_000  # 17 kB in arrays form


def _drop_source(obs: Observation) -> Observation:
    return Observation(obs.node_features, obs.edge_index, obs.edge_attr, obs.actions, obs.action_meta)


@pytest.mark.parametrize("change", ["actions", "meta", "edge_attr", "radius", "neighbors", "edge_order"])
def test_observation_that_differs_from_its_source_is_stored_as_arrays(change):
    from dataclasses import replace

    t = _env_transition(12, seed=3)
    tree_form_bytes = len(record.encode_transition(t))
    obs = t.next_obs
    if change == "actions":
        obs.actions[[0, 1]] = obs.actions[[1, 0]]
    elif change == "meta":
        obs.action_meta[5, 2] += 1
    elif change == "edge_attr":
        obs.edge_attr[1, 0] *= 2  # the two directions of edge 0 now differ
    elif change == "radius":
        obs.source = replace(obs.source, radius=2)
    elif change == "neighbors":
        neighbors = obs.source.neighbors.copy()
        internal = obs.source.n_leaves
        neighbors[internal] = neighbors[internal][[1, 0, 2]]  # a different slot order enumerates differently
        obs.source = replace(obs.source, neighbors=neighbors)
    else:
        obs.edge_index = obs.edge_index[:, ::-1].copy()
    data = record.encode_transition(t)
    back = record.decode_transition(data)
    assert_same_transition(back, t)
    assert len(data) > 3 * tree_form_bytes  # the moves themselves are stored
    assert back.next_obs.source is None and back.obs.source is not None


def test_extra_node_features_are_stored_in_tree_form():
    t = _env_transition(10, seed=4)
    t.obs.node_features = np.concatenate(
        [t.obs.node_features, np.random.default_rng(0).normal(size=(18, 2)).astype(np.float32)], axis=1)
    data = record.encode_transition(t)
    assert_same_transition(record.decode_transition(data), t)
    assert len(data) < 1_500


def test_corrupt_tree_form_raises_a_clear_error():
    t = _env_transition(8, seed=5)
    data = bytearray(record.encode_transition(t))
    # the first observation's neighbour table starts after header, form byte, tree header and array header
    start = struct.calcsize("<4sBBqddq") + 1 + struct.calcsize("<IiB") + 4 + 2 * 4
    data[start + 3 * 8] = 0  # node 8 (the first internal node) now names node 0 as its first neighbour twice
    data[start + 3 * 8 + 1] = 0
    with pytest.raises(ValueError, match="corrupt transition record: stored tree is invalid"):
        record.decode_transition(bytes(data))
    data = bytearray(record.encode_transition(t))
    data[struct.calcsize("<4sBBqddq")] = 7
    with pytest.raises(ValueError, match="unknown observation form 7"):
        record.decode_transition(bytes(data))


def test_records_of_another_format_version_are_refused():
    t = random_transition(6, 40, np.random.default_rng(6))
    data = bytearray(record.encode_transition(t))
    data[4] = 2  # the header's version byte
    assert not record.is_record(bytes(data))
    with pytest.raises(ValueError, match="format version 2; this code reads versions 3, 4, 5"):
        record.decode_transition(bytes(data))


def test_demonstration_labels_round_trip_and_are_checked():
    t = _env_transition(12, seed=4)
    t.next_labels = np.random.default_rng(0).normal(size=t.next_obs.n_actions).astype(np.float32)
    data = record.encode_transition(t)
    back = record.decode_transition(data)
    assert_same_transition(back, t)
    assert back.next_labels.dtype == np.float32 and np.array_equal(back.next_labels, t.next_labels)
    assert record.decode_transition(record.encode_transition(_env_transition(12, seed=4))).next_labels is None
    with pytest.raises(ValueError, match="one per move of next_obs"):
        record.encode_transition(dataclasses.replace(t, next_labels=t.next_labels[:-1]))
    with pytest.raises(ValueError, match="one per move of next_obs"):
        record.encode_transition(dataclasses.replace(t, next_labels=t.next_labels.astype(np.float64)))
    flags_at = 5  # the header's flags byte: dropping bit 2 leaves the labels as trailing bytes
    corrupt = bytearray(data)
    corrupt[flags_at] &= ~4
    with pytest.raises(ValueError, match="trailing bytes"):
        record.decode_transition(bytes(corrupt))


def test_the_taken_row_is_stored_and_checked_against_the_state():
    t = _env_transition(12, seed=5)
    data, width = record.encode_transition(t), t.obs.action_meta.shape[1]
    # two arrays: a header and shape each, 4 node ids as bytes and the features as float32
    version4 = record.encode_transition(t, version=4)
    assert data[5] & 8 and version4[5] & 8 and version4[4] == 4
    assert len(version4) == len(record.encode_transition(t, version=3)) + 2 * (4 + 4) + 4 + 4 * width
    assert_same_transition(record.decode_transition(data), t)
    assert_same_transition(record.decode_transition(version4), t)
    version3 = bytearray(record.encode_transition(t, version=3))
    assert not version3[5] & 8 and version3[4] == 3  # version 3 is version 4 without a taken row
    assert_same_transition(record.decode_transition(bytes(version3)), t)
    with pytest.raises(ValueError, match="cannot write format version 6"):
        record.encode_transition(t, version=6)
    version3[5] |= 8
    with pytest.raises(ValueError, match="flag bit 3"):
        record.decode_transition(bytes(version3))
    corrupt = bytearray(data)
    corrupt[-1] ^= 1  # the last feature's exponent: another finite value
    with pytest.raises(ValueError, match=f"taken move's features are not those of move {t.action} of its"):
        record.decode_transition(bytes(corrupt))
    corrupt = bytearray(data)
    corrupt[-4 * width - 8 - 4] ^= 1  # the first node id
    with pytest.raises(ValueError, match="taken move's node ids"):
        record.decode_transition(bytes(corrupt))
    for action in (-1, t.obs.n_actions):  # no row to store: the record says so, and its action is checked later
        assert not record.encode_transition(dataclasses.replace(t, action=action))[5] & 8
    corrupt = bytearray(data)
    corrupt[6:14] = struct.pack("<q", t.obs.n_actions)
    with pytest.raises(ValueError, match="not one of the state's"):
        record.decode_transition(bytes(corrupt))


def test_a_state_is_checked_once_and_encoded_afresh_when_it_changes(monkeypatch):
    """An actor encodes each state up to three times; the rebuild check runs once while the state is unchanged,
    and any change to what the record is made from (arrays, move source, rich parts) is encoded afresh."""
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.env import tree_observation
    from phylorl.phylo.simulate import simulate_dataset

    alignment = simulate_dataset(8, 200, np.random.default_rng(5)).alignment
    env = TreeEnv([EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "a")], EnvConfig(), seed=0)
    obs, _ = env.reset()
    checks = []
    original = tree_observation.rich_tree_arrays_of
    monkeypatch.setattr(tree_observation, "rich_tree_arrays_of",
                        lambda o, now=None: checks.append(1) or original(o, now))
    first = record.encode_observation(obs)
    assert record.encode_observation(obs) == first and len(checks) == 1
    assert record.decode_transition(record.encode_transition(Transition(obs, 0, 0.0, obs, False, False))).obs.n_actions \
        == obs.n_actions and len(checks) == 1
    changes = [lambda o: o.action_meta.__setitem__((0, 3), o.action_meta[0, 3] + 1),
               lambda o: o.rich.deltas.__setitem__(0, o.rich.deltas[0] + 1),
               lambda o: o.edge_attr.__setitem__((0, 0), 0.5)]
    for i, change in enumerate(changes):
        change(obs)
        again = record.encode_observation(obs)
        assert len(checks) == 2 + i  # encoded afresh (the rebuild no longer matches: the arrays form)
        assert again[5] == 0 and first[5] == 2
        decoded = record.decode_observation(again)
        for name in record.OBS_FIELDS:
            assert getattr(decoded, name).tobytes() == getattr(obs, name).tobytes(), name


@pytest.mark.parametrize("radius", [None, 3])
def test_environment_observations_are_the_rich_tree_form_by_construction(radius):
    """TreeEnv marks its rich observations as built from the tree, which spares the encoder the rebuild; the mark
    is true (the full check, on a copy without it, agrees on every state of an episode) and counts only while the
    observation is unchanged."""
    from dataclasses import replace

    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.env import tree_observation
    from phylorl.phylo.simulate import simulate_dataset

    alignment = simulate_dataset(20, 300, np.random.default_rng(6)).alignment
    env = TreeEnv([EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "a")],
                  EnvConfig(radius=radius, horizon=5), seed=1)
    obs, _ = env.reset()
    rng = np.random.default_rng(2)
    for _ in range(5):
        assert tree_observation._BUILT in obs.__dict__
        marked = tree_observation.rich_tree_arrays_of(obs)
        checked = tree_observation.rich_tree_arrays_of(replace(obs))  # a copy carries no mark: rebuilt and compared
        assert marked is not None and checked is not None
        assert all(np.array_equal(a, b) for a, b in zip(marked, checked))
        decoded = record.decode_observation(record.encode_observation(obs))
        for name in record.OBS_FIELDS:
            assert getattr(decoded, name).tobytes() == getattr(obs, name).tobytes(), name
        obs = env.step(int(rng.integers(obs.n_actions)))[0]
    obs.action_meta[0, 0] += 1
    assert tree_observation.rich_tree_arrays_of(obs) is None  # the mark no longer counts: rebuilt, and it differs
