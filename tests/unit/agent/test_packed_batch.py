"""The compiled record -> batch path equals decoding every record and collating, bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from phylorl.agent.batch import collate, on_device
from phylorl.agent.packed_batch import collate_records
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.compact_actions import CompactActions, expand_actions
from phylorl.nets.segment import Segments
from phylorl.phylo import load_alignment
from phylorl.phylo.simulate import simulate_dataset
from phylorl.types import Transition
from phylorl.wire.codec import PackedRecords
from phylorl.wire.record import decode_transition, encode_transition
from phylorl.wire.synthetic import random_transition


def _episodes(alignment, config: EnvConfig, steps: int, seed: int, labels: bool = False) -> list[bytes]:
    """Records of a random walk of the real environment (resets at the horizon), as an actor makes them."""
    env = TreeEnv([EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "a")], config, seed=seed)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset()
    records = []
    for i in range(steps):
        action = int(rng.integers(obs.n_actions))
        nxt, reward, terminal, truncated, _ = env.step(action)
        next_labels = rng.normal(size=nxt.n_actions).astype(np.float32) if labels and i % 3 == 0 else None
        discount = 0.0 if i % 7 == 3 else 0.99 ** (1 + i % 3)
        records.append(encode_transition(Transition(obs, action, reward, nxt, bool(i % 11 == 5), truncated, discount,
                                                    policy_version=i - 1, next_labels=next_labels)))
        obs = env.reset()[0] if truncated else nxt
    return records


def _assert_same(a, b, where: str = "batch") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"
        assert a.numpy().tobytes() == b.numpy().tobytes(), f"{where} differs"
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            _assert_same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def _check(records: list[bytes], batch_size: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    checked = 0
    for start in range(0, len(records), batch_size):
        chosen = [records[i] for i in rng.permutation(len(records))[:batch_size]]  # a sampled batch: any order
        weights = rng.random(len(chosen)).astype(np.float32)
        fast = collate_records(PackedRecords.from_records(chosen), weights=weights)
        assert fast is not None
        batch, versions = fast
        transitions = [decode_transition(r) for r in chosen]
        reference = collate(transitions, weights=weights)
        _assert_same(batch, reference)
        assert versions.tolist() == [t.policy_version for t in transitions]
        compact, _ = collate_records(PackedRecords.from_records(chosen), weights=weights, compact=True)
        assert isinstance(compact.next_actions, CompactActions)
        moves = compact.next_actions
        assert moves.shared_row.dtype == moves.walk_slot.dtype == moves.blocks.dtype == torch.int32
        assert moves.walk_slot.shape[0] <= moves.count // 2 + 6 * compact.next_graphs.x.shape[0]  # walks shared
        _assert_same(on_device(compact, "cpu"), reference)  # expanded on the host, in one compiled pass
        _assert_same(expand_actions(compact.next_actions), reference.next_actions)  # tensor gathers, as on a GPU
        checked += len(chosen)
    return checked


@pytest.fixture(scope="module")
def simulated():
    return simulate_dataset(20, 600, np.random.default_rng(7)).alignment


def test_rich_records_of_real_episodes_equal_the_reference_path(ds_reference, simulated):
    ds1 = load_alignment(ds_reference("DS1", "JC")["alignment"])
    records = _episodes(ds1, EnvConfig(horizon=12), 60, seed=1) + _episodes(simulated, EnvConfig(horizon=20), 80, seed=2)
    assert _check(records, 32) == 5 * 32
    assert _check(records, 128, seed=3) == 2 * 128


def test_labels_radius_and_basic_features_equal_the_reference_path(simulated):
    labelled = _episodes(simulated, EnvConfig(horizon=8), 40, seed=4, labels=True)
    assert any(decode_transition(r).next_labels is not None for r in labelled)
    _check(labelled, 16)
    _check(_episodes(simulated, EnvConfig(horizon=8, radius=3), 40, seed=5), 16)
    _check(_episodes(simulated, EnvConfig(horizon=8, features="basic"), 40, seed=6), 16)
    _check(_episodes(simulated, EnvConfig(horizon=8, features="basic", radius=2), 40, seed=7, labels=True), 16)


def test_labels_are_absent_when_no_next_state_is_labelled(simulated):
    """No labelled record: no labels at all (nothing reads them); some: zeros for the unlabelled states' moves."""
    batch, _ = collate_records(PackedRecords.from_records(_episodes(simulated, EnvConfig(horizon=6), 8, seed=21)))
    assert not batch.any_labelled and batch.next_labels.shape == (0,) and not batch.next_labelled.any()
    mixed = _episodes(simulated, EnvConfig(horizon=6), 8, seed=22, labels=True)  # every third one labelled
    batch, _ = collate_records(PackedRecords.from_records(mixed))
    labelled = batch.next_labelled.tolist()
    assert batch.any_labelled and any(labelled) and not all(labelled)
    per_state = batch.next_labels.split(batch.next_actions.states.sizes.tolist())
    assert len(per_state) == len(labelled)
    for state_labelled, labels in zip(labelled, per_state):
        assert bool((labels != 0).all()) if state_labelled else bool((labels == 0).all())


def test_segments_and_sizes_of_mixed_tree_sizes(ds_reference, simulated):
    """States of different alignments (27 and 20 taxa) in one batch: per-state segments, not uniform."""
    ds1 = load_alignment(ds_reference("DS1", "JC")["alignment"])
    records = _episodes(ds1, EnvConfig(horizon=5), 6, seed=8) + _episodes(simulated, EnvConfig(horizon=5), 6, seed=9)
    batch, _ = collate_records(PackedRecords.from_records(records))
    assert isinstance(batch.next_graphs.nodes, Segments) and batch.next_graphs.nodes.size is None
    assert batch.next_graphs.nodes.sizes.tolist() == [52] * 6 + [38] * 6
    assert batch.next_actions.states.sizes.tolist() == [2 * 24 * 47] * 6 + [2 * 17 * 33] * 6
    _check(records, 12)


def test_records_it_does_not_read_send_the_batch_to_the_reference_path(simulated):
    from phylorl.env.batch_kernels import records_valid
    good = _episodes(simulated, EnvConfig(horizon=6), 8, seed=10)
    arrays_form = encode_transition(random_transition(8, 30, np.random.default_rng(0)))
    assert collate_records(PackedRecords.from_records(good + [arrays_form])) is None
    basic = _episodes(simulated, EnvConfig(horizon=6, features="basic"), 2, seed=11)
    assert collate_records(PackedRecords.from_records(good + basic)) is None  # two feature sets in one batch
    corrupt = bytearray(good[0])
    corrupt[60:64] = b"\xff\xff\xff\xff"
    truncated = good[1][:-5]
    for bad in (bytes(corrupt), truncated, b"PRLT", b"nonsense" * 10):
        assert collate_records(PackedRecords.from_records(good[2:] + [bad]), verify=True) is None
    for bad in (truncated, b"PRLT", b"nonsense" * 10):
        assert collate_records(PackedRecords.from_records(good[2:] + [bad])) is None
    # the damage is in the neighbour table of a state whose taken row is stored: the learner reads that state's
    # graph from its edges alone, and the insert check rejects the record
    packed = PackedRecords.from_records(good[2:] + [bytes(corrupt)])
    assert collate_records(packed) is not None
    assert not records_valid(np.frombuffer(packed.data, np.uint8), packed.offsets)
    first = decode_transition(good[0])
    for action in (first.obs.n_actions, -1):  # a record the encoder accepts but no batch can hold
        bad = encode_transition(dataclasses.replace(first, action=action))
        assert collate_records(PackedRecords.from_records(good[1:] + [bad])) is None
        with pytest.raises(ValueError, match="action"):
            collate([decode_transition(bad)])


def test_rejects_empty_batches_and_bad_weights(simulated):
    good = _episodes(simulated, EnvConfig(horizon=6), 4, seed=12)
    with pytest.raises(ValueError, match="empty"):
        collate_records(PackedRecords.from_records([]))
    with pytest.raises(ValueError, match="weights"):
        collate_records(PackedRecords.from_records(good), weights=np.ones(3))


def test_damaged_records_give_the_reference_result_or_the_reference_path(simulated):
    """Random byte damage: the verified compiled path either declines the batch or equals the reference
    decode. The learner's (unverified) path also may read a record whose stored taken row no longer matches its
    state, and only such a record: one the replay's insert check (``records_valid``) rejects."""
    from phylorl.env.batch_kernels import records_valid
    records = _episodes(simulated, EnvConfig(horizon=6), 12, seed=13, labels=True)
    rng = np.random.default_rng(14)
    declined, trusted = 0, 0
    for trial in range(300):
        damaged = list(records[:4])
        record = bytearray(damaged[trial % 4])
        for _ in range(1 + trial % 3):
            record[int(rng.integers(len(record)))] = int(rng.integers(256))
        damaged[trial % 4] = bytes(record)
        packed = PackedRecords.from_records(damaged)
        try:
            reference = collate([decode_transition(r) for r in damaged])
        except ValueError:
            reference = None
        verified = collate_records(packed, verify=True)
        if verified is not None:
            assert reference is not None, f"trial {trial}: the verified path read a batch the reference rejects"
            _assert_same(verified[0], reference)
        fast = collate_records(packed)
        if fast is None:
            declined += 1
        elif reference is None:
            assert not records_valid(np.frombuffer(packed.data, np.uint8), packed.offsets), f"trial {trial}"
            trusted += 1
        else:
            _assert_same(fast[0], reference)
    assert 0 < declined < 300 and trusted > 0  # both cases met


def test_records_valid_accepts_what_check_transition_accepts_and_nothing_else(simulated):
    from phylorl.env.batch_kernels import records_valid
    from phylorl.phylo import enumerate_moves, move_metadata, random_tree
    from phylorl.env.tree_observation import build_observation
    from phylorl.types import check_transition

    def packed(records):
        p = PackedRecords.from_records(records)
        return np.frombuffer(p.data, np.uint8), p.offsets

    good = _episodes(simulated, EnvConfig(horizon=6), 6, seed=15, labels=True)
    assert records_valid(*packed(good))
    tree = random_tree([f"t{i}" for i in range(8)], np.random.default_rng(3))
    tree.lengths[2] = np.nan
    moves = enumerate_moves(tree)
    nan_tree = build_observation(tree, moves, move_metadata(tree, moves))
    first = decode_transition(good[0])
    bad = [encode_transition(Transition(nan_tree, 0, 0.0, nan_tree, False, False, 0.99)),
           encode_transition(dataclasses.replace(first, discount=1.5)),
           encode_transition(dataclasses.replace(first, reward=float("inf"))),
           encode_transition(dataclasses.replace(first, next_labels=np.full(first.next_obs.n_actions, np.nan,
                                                                            np.float32)))]
    for record in bad:
        with pytest.raises(ValueError):
            check_transition(decode_transition(record))
        assert not records_valid(*packed(good[:3] + [record]))


def test_stored_taken_rows_give_the_batch_their_states_give(simulated):
    """Version-4 records carry the taken move's row: the batch equals, bit for bit, that of the same records
    without it (the move then found by enumerating the state, as for version 3). A row that disagrees with its
    state is read as stored only without ``verify`` (the insert check rejects it); an impossible node id sends
    the batch to the reference path."""
    from phylorl.env.batch_kernels import records_valid
    for config in (EnvConfig(horizon=8), EnvConfig(horizon=8, features="basic", radius=3)):
        records = _episodes(simulated, config, 24, seed=18)
        assert all(r[5] & 8 for r in records)
        version3 = [encode_transition(decode_transition(r), version=3) for r in records]
        version4 = [encode_transition(decode_transition(r), version=4) for r in records]
        assert not any(r[5] & 8 for r in version3) and all(r[38] in (1, 2) for r in version3)  # tree forms still
        assert all(r[4] == 3 for r in version3) and all(r[4] == 4 and r[5] & 8 for r in version4)
        stored = collate_records(PackedRecords.from_records(records))[0]
        for other in (version3, version4):
            _assert_same(collate_records(PackedRecords.from_records(other))[0], stored)
        _assert_same(collate_records(PackedRecords.from_records(records), verify=True)[0], stored)
    width = stored.actions.meta.shape[1]  # the basic records: no labels, so the row ends each record
    tampered = bytearray(records[0])
    tampered[-1] ^= 1  # the last feature's exponent
    packed = PackedRecords.from_records([bytes(tampered)] + records[1:])
    read = collate_records(packed)[0].actions.meta
    assert read[0, -1] != stored.actions.meta[0, -1] and torch.equal(read[1:], stored.actions.meta[1:])
    assert collate_records(packed, verify=True) is None
    assert not records_valid(np.frombuffer(packed.data, np.uint8), packed.offsets)
    assert records_valid(np.frombuffer(PackedRecords.from_records(records).data, np.uint8),
                         PackedRecords.from_records(records).offsets)
    impossible = bytearray(records[0])
    impossible[-4 * width - 8 - 4] = 200  # the taken move's first node id: no such node
    assert collate_records(PackedRecords.from_records([bytes(impossible)] + records[1:])) is None
    # that state's graph is read from its edges alone (no tree check): edges that would write outside its rows
    from phylorl.wire.record_reader import array_header, observation_header
    arrays = np.zeros(6, np.int64)
    buf = np.frombuffer(records[0], np.uint8)
    assert observation_header(buf, 38, len(buf), arrays)[0]
    edges = array_header(buf, arrays[1], len(buf))
    assert edges[2] == 5  # node ids as bytes
    first_edge = int(edges[6])
    for u, v in ((200, records[0][first_edge + 1]), (3, 3)):  # no such node; a loop, a fourth edge at node 3
        bad = bytearray(records[0])
        bad[first_edge], bad[first_edge + 1] = u, v
        assert collate_records(PackedRecords.from_records([bytes(bad)] + records[1:])) is None
    crowded = bytearray(records[0])
    crowded[first_edge: first_edge + 8] = bytes([5, 6] * 4)  # four edges at node 5
    assert collate_records(PackedRecords.from_records([bytes(crowded)] + records[1:])) is None


def test_observation_records_equal_collating_the_decoded_observations(ds_reference, simulated):
    """Inference requests carry observation records; the compiled pass gives what collate_observations gives."""
    from phylorl.agent.packed_batch import collate_states
    from phylorl.nets.inputs import collate_observations
    from phylorl.wire.record import decode_observation, encode_observation

    ds1 = load_alignment(ds_reference("DS1", "JC")["alignment"])
    for alignment, config in ((simulated, EnvConfig()), (ds1, EnvConfig(radius=4)), (simulated, EnvConfig(features="basic"))):
        records = [encode_observation(decode_transition(r).next_obs)
                   for r in _episodes(alignment, dataclasses.replace(config, horizon=5), 9, seed=16)]
        assert all(r[5] in (1, 2) for r in records)  # the tree forms
        packed = PackedRecords.from_records(records)
        graphs, actions, rich = collate_states(packed)
        assert rich == (config.features == "rich")
        reference = collate_observations([decode_observation(r) for r in records])
        _assert_same(graphs, reference[0], "graphs")
        _assert_same(actions, reference[1], "actions")
    arrays_form = encode_observation(random_transition(8, 30, np.random.default_rng(0)).obs)
    assert collate_states(PackedRecords.from_records(records[:2] + [arrays_form])) is None
    assert collate_states(PackedRecords.from_records(records[:2] + [records[0][:-4]])) is None
    with pytest.raises(ValueError, match="trailing"):
        decode_observation(records[0] + b"\x00")
    with pytest.raises(ValueError, match="not a phylorl observation record"):
        decode_observation(good_transition := _episodes(simulated, EnvConfig(horizon=3), 1, seed=17)[0])
    assert good_transition[:4] == b"PRLT"


def test_compile_kernels_runs_every_record_pass_on_environment_records():
    from phylorl.agent.packed_batch import compile_kernels

    assert compile_kernels(seed=1) == 2


def test_observation_records_leave_no_unwritten_memory_in_the_batch(simulated):
    """Observation records have no taken move: its arrays must still be written (zeros), since the finiteness check
    reads them. Memory freed just before holds NaNs, which an uninitialised allocation would pick up (the inference
    endpoint then sent such requests down the slow reference path, at random)."""
    from phylorl.agent.packed_batch import collate_states
    from phylorl.env.batch_kernels import decode_batch
    from phylorl.wire.record import encode_observation

    records = [encode_observation(decode_transition(r).next_obs)
               for r in _episodes(simulated, EnvConfig(horizon=5), 3, seed=18)]
    packed = PackedRecords.from_records(records)
    buf, offsets = np.frombuffer(packed.data, dtype=np.uint8), np.ascontiguousarray(packed.offsets, dtype=np.int64)
    for n in (1, 2, 3):
        for _ in range(200):
            junk = [np.full(n * k, np.nan, np.float32) for k in (4, 15, 60)]  # freed: the allocator's next blocks
            del junk
            _, decoded = decode_batch(buf[: offsets[n]], offsets[: n + 1], states=True)
            taken, taken_meta = decoded[3][2], decoded[3][3]
            assert not taken.any() and not taken_meta.any()
        assert collate_states(PackedRecords.from_records(records[:n])) is not None


def test_the_host_expansion_knows_the_rich_layout_and_reads_any_other():
    """``expand_moves`` writes the rich layout row by row and any other layout a column at a time: both equal
    the tensor gathers."""
    from phylorl.env.move_kernels import RICH_LAYOUT, expand_moves

    rng = np.random.default_rng(0)
    tables = [rng.normal(size=(30, w)).astype(np.float32) for w in (6, 4, 3)]
    walk_slot, walk_own = rng.integers(0, 30, 40).astype(np.int32), rng.normal(size=(40, 2)).astype(np.float32)
    lengths = np.array([3, 0, 7, 1, 20, 19])   # 50 moves; blocks overlap in the walk as a state's do
    blocks = np.stack([rng.integers(0, 30, 6), rng.integers(0, 20, 6), lengths], 1).astype(np.int32)
    shared_row, slot_node = rng.integers(0, 30, 50).astype(np.int32), rng.integers(0, 10, 30)
    arrays = (slot_node, *tables, walk_slot, walk_own, blocks, shared_row)
    for columns in (RICH_LAYOUT, tuple(rng.permutation(15))):
        compact = CompactActions(*map(torch.from_numpy, (*arrays, np.array(columns))), sizes=torch.tensor([20, 30]),
                                 uniform=None)
        nodes, meta = expand_moves(*arrays, np.array(columns))
        reference = expand_actions(compact)
        assert np.array_equal(nodes, reference.nodes.numpy())
        assert meta.tobytes() == reference.meta.numpy().tobytes()
        first = np.repeat(blocks[:, 1], lengths) + np.arange(50) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        assert np.array_equal(nodes[:, 2], walk_slot[first] // 3)   # each block is a run of walk rows
        assert reference.states.index.tolist() == [0] * 20 + [1] * 30 and reference.states.count == 2


def test_the_learner_takes_compact_batches_as_expanded_ones(simulated):
    """A sampled batch in compact form (as the learner service collates it) makes the same update."""
    from phylorl.agent.config import AgentConfig
    from phylorl.agent.learner import Learner
    from phylorl.nets.config import NetworkConfig

    records = PackedRecords.from_records(_episodes(simulated, EnvConfig(horizon=6), 12, seed=19, labels=True))
    net = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32, features="rich")
    learners = [Learner(net, AgentConfig(demo_weight=0.5), seed=4) for _ in range(2)]
    for compact, learner in zip((False, True), learners):
        batch, _ = collate_records(records, compact=compact)
        assert isinstance(batch.next_actions, CompactActions) == compact
        metrics, priorities = learner.step(batch)
        assert np.isfinite(priorities).all()
    for a, b in zip(learners[0].q1.parameters(), learners[1].q1.parameters()):
        assert torch.equal(a, b)


def _damage_ranked_counts(record: bytes, at: int) -> bytes:
    """``record`` with the ranked parsimony changes of the observation at byte ``at`` miscounted: one move moved
    from the first value's count to the second's (the sum unchanged)."""
    from phylorl.wire.record_reader import array_header, observation_header

    buf, arrays = np.frombuffer(record, np.uint8), np.zeros(6, np.int64)
    assert observation_header(buf, at, len(buf), arrays)[0]
    deltas = array_header(buf, arrays[3], len(buf))
    payload = int(deltas[6])
    assert deltas[1] == 2 and buf[payload + 4] == 5  # ranked, with uint8 counts
    counts_at = payload + 5 + 2 * int(buf[payload: payload + 4].view(np.uint32)[0])
    bad = bytearray(record)
    bad[counts_at], bad[counts_at + 1] = bad[counts_at] + 1, bad[counts_at + 1] - 1
    return bytes(bad)


def test_ranked_counts_are_read_on_trust_only_where_the_insert_check_made_sure_of_them(simulated):
    """A record whose stored counts do not hold: the learner's path reads them as stored; the insert check, the
    verified path and the reference decoder refuse the record, and an inference request holding such a state is
    refused by the compiled pass (the reference path then names it)."""
    from phylorl.agent.packed_batch import collate_states
    from phylorl.env.batch_kernels import records_valid
    from phylorl.wire.record import decode_observation, encode_observation
    from phylorl.wire.record_reader import observation_header

    records = _episodes(simulated, EnvConfig(horizon=8), 8, seed=23)
    arrays = np.zeros(6, np.int64)
    second = observation_header(np.frombuffer(records[0], np.uint8), 38, len(records[0]), arrays)[5]
    bad = _damage_ranked_counts(records[0], second)  # the next state's
    good = collate_records(PackedRecords.from_records(records))[0]
    packed = PackedRecords.from_records([bad] + records[1:])
    read = collate_records(packed)[0]
    sizes = good.next_actions.states.sizes.tolist()
    first_changed = [not torch.equal(a, b) for a, b in zip(read.next_actions.meta.split(sizes),
                                                            good.next_actions.meta.split(sizes))]
    assert first_changed == [True] + [False] * (len(records) - 1)
    assert collate_records(packed, verify=True) is None
    assert not records_valid(np.frombuffer(packed.data, np.uint8), packed.offsets)
    with pytest.raises(ValueError, match="ranked"):
        decode_transition(bad)
    state = encode_observation(decode_transition(records[0]).next_obs)
    assert collate_states(PackedRecords.from_records([state])) is not None
    bad_state = _damage_ranked_counts(state, 5)
    assert collate_states(PackedRecords.from_records([bad_state])) is None
    with pytest.raises(ValueError, match="ranked"):
        decode_observation(bad_state)
