"""Records into the network's inputs in one compiled pass: equal, bit for bit, to the features written out
move by move and collated with numpy (the oracles), and every bad record named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import assert_same, episodes
from oracles.collate import collate, collate_observations
from oracles.records import decode_observation, decode_transition

from phylorl.agent.transfer import on_device
from phylorl.env.config import EnvConfig
from phylorl.nets.compact_actions import CompactActions, expand_actions
from phylorl.nets.segment import Segments
from phylorl.nets.synthetic import random_observation
from phylorl.phylo import load_alignment
from phylorl.phylo.simulate import simulate_dataset
from phylorl.records.codec import encode_observation, encode_transition
from phylorl.records.collate import collate_records, collate_states, compile_kernels
from phylorl.records.decode import check_records
from phylorl.records.format import PackedRecords
from phylorl.records.reader import array_header, observation_header


def _check(records: list[bytes], batch_size: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    checked = 0
    for start in range(0, len(records), batch_size):
        # a sampled batch: any order
        chosen = [records[i] for i in rng.permutation(len(records))[:batch_size]]
        weights = rng.random(len(chosen)).astype(np.float32)
        compact, versions = collate_records(PackedRecords.from_records(chosen), weights)
        transitions = [decode_transition(r) for r in chosen]
        reference = collate(transitions, weights=weights)
        assert versions.tolist() == [t.policy_version for t in transitions]
        assert isinstance(compact.next_actions, CompactActions)
        moves = compact.next_actions
        assert moves.shared_row.dtype == moves.walk_slot.dtype == moves.blocks.dtype == torch.int32
        # walks shared
        assert moves.walk_slot.shape[0] <= moves.count // 2 + 6 * compact.next_graphs.x.shape[0]
        assert_same(on_device(compact, "cpu"), reference)  # expanded on the host, in one compiled pass
        # tensor gathers, as on a GPU
        assert_same(expand_actions(compact.next_actions), reference.next_actions)
        verified, _ = collate_records(PackedRecords.from_records(chosen), weights, verify=True)
        assert_same(on_device(verified, "cpu"), reference)
        checked += len(chosen)
    return checked


@pytest.fixture(scope="module")
def simulated():
    return simulate_dataset(20, 600, np.random.default_rng(7)).alignment


def test_rich_records_of_real_episodes_equal_the_oracle(ds_reference, simulated):
    ds1 = load_alignment(ds_reference("DS1", "JC")["alignment"])
    records = episodes(ds1, EnvConfig(horizon=12), 60, seed=1) + episodes(
        simulated, EnvConfig(horizon=20), 80, seed=2
    )
    assert _check(records, 32) == 5 * 32
    assert _check(records, 128, seed=3) == 2 * 128


def test_labels_radius_and_basic_features_equal_the_oracle(simulated):
    labelled = episodes(simulated, EnvConfig(horizon=8), 40, seed=4, labels=True)
    assert any(decode_transition(r).next_labels is not None for r in labelled)
    _check(labelled, 16)
    _check(episodes(simulated, EnvConfig(horizon=8, radius=3), 40, seed=5), 16)
    _check(episodes(simulated, EnvConfig(horizon=8, features="basic"), 40, seed=6), 16)
    _check(episodes(simulated, EnvConfig(horizon=8, features="basic", radius=2), 40, seed=7, labels=True), 16)


def test_labels_are_absent_when_no_next_state_is_labelled(simulated):
    """No labelled record: no labels at all (nothing reads them); some: zeros for the unlabelled states'
    moves."""
    batch, _ = collate_records(
        PackedRecords.from_records(episodes(simulated, EnvConfig(horizon=6), 8, seed=21))
    )
    assert not batch.any_labelled and batch.next_labels.shape == (0,) and not batch.next_labelled.any()
    mixed = episodes(simulated, EnvConfig(horizon=6), 8, seed=22, labels=True)  # every third one labelled
    batch, _ = collate_records(PackedRecords.from_records(mixed))
    labelled = batch.next_labelled.tolist()
    assert batch.any_labelled and any(labelled) and not all(labelled)
    per_state = batch.next_labels.split(batch.next_actions.sizes.tolist())
    assert len(per_state) == len(labelled)
    for state_labelled, labels in zip(labelled, per_state):
        assert bool((labels != 0).all()) if state_labelled else bool((labels == 0).all())


def test_segments_and_sizes_of_mixed_tree_sizes(ds_reference, simulated):
    """States of different alignments (27 and 20 taxa) in one batch: per-state segments, not uniform."""
    ds1 = load_alignment(ds_reference("DS1", "JC")["alignment"])
    records = episodes(ds1, EnvConfig(horizon=5), 6, seed=8) + episodes(
        simulated, EnvConfig(horizon=5), 6, seed=9
    )
    batch, _ = collate_records(PackedRecords.from_records(records))
    assert isinstance(batch.next_graphs.nodes, Segments) and batch.next_graphs.nodes.size is None
    assert batch.next_graphs.nodes.sizes.tolist() == [52] * 6 + [38] * 6
    assert batch.next_actions.sizes.tolist() == [2 * 24 * 47] * 6 + [2 * 17 * 33] * 6
    _check(records, 12)


def test_bad_records_are_named(simulated):
    good = episodes(simulated, EnvConfig(horizon=6), 8, seed=10)
    basic = episodes(simulated, EnvConfig(horizon=6, features="basic"), 2, seed=11)
    with pytest.raises(ValueError, match="mixes states of the rich and the basic"):
        collate_records(PackedRecords.from_records(good + basic))
    truncated = good[1][:-5]
    for bad in (truncated, b"PRLT", b"nonsense" * 10):
        for verify in (False, True):
            with pytest.raises(ValueError, match="record 6: not a phylorl record of this format"):
                collate_records(PackedRecords.from_records(good[2:] + [bad]), verify=verify)
    with pytest.raises(ValueError, match="empty"):
        collate_records(PackedRecords.from_records([]))
    with pytest.raises(ValueError, match="weights"):
        collate_records(PackedRecords.from_records(good), np.ones(3))


def _taken_row_start(record: bytes, width: int) -> int:
    return len(record) - (4 + 4 + 4 * width) - (4 + 4 + 4)


def test_a_stored_taken_row_is_read_as_stored_and_verified_where_records_come_in(simulated):
    """The learner reads each record's taken row as stored (the replay's insert check verified it): a row that
    disagrees with its state is read as it is, and refused by the check and the verified pass."""
    for config in (EnvConfig(horizon=8), EnvConfig(horizon=8, features="basic", radius=3)):
        records = episodes(simulated, config, 24, seed=18)
        stored = collate_records(PackedRecords.from_records(records))[0]
        assert_same(collate_records(PackedRecords.from_records(records), verify=True)[0], stored)
    width = stored.actions.meta.shape[1]  # the basic records: no labels, so the row ends each record
    tampered = bytearray(records[0])
    tampered[-1] ^= 1  # the last feature's exponent
    packed = PackedRecords.from_records([bytes(tampered)] + records[1:])
    read = collate_records(packed)[0].actions.meta
    assert read[0, -1] != stored.actions.meta[0, -1] and torch.equal(read[1:], stored.actions.meta[1:])
    with pytest.raises(ValueError, match="record 0: its stored taken move is not its state's move"):
        collate_records(packed, verify=True)
    with pytest.raises(ValueError, match="record 0: its stored taken move"):
        check_records(packed)
    check_records(PackedRecords.from_records(records))
    impossible = bytearray(records[0])
    impossible[_taken_row_start(records[0], width) + 8] = 200  # the taken move's first node id: no such node
    with pytest.raises(ValueError, match="record 0: its stored taken move"):
        collate_records(PackedRecords.from_records([bytes(impossible)] + records[1:]))
    # that state's graph is read from its edges alone (no tree check): edges that would write outside its rows
    arrays = np.zeros(6, np.int64)
    buf = np.frombuffer(records[0], np.uint8)
    assert observation_header(buf, 38, len(buf), arrays)[0]
    edges = array_header(buf, arrays[1], len(buf))
    assert edges[2] == 5  # node ids as bytes
    first_edge = int(edges[6])
    for u, v in ((200, records[0][first_edge + 1]), (3, 3)):  # no such node; a loop, a fourth edge at node 3
        bad = bytearray(records[0])
        bad[first_edge], bad[first_edge + 1] = u, v
        with pytest.raises(ValueError, match="record 0: its arrays do not form an unrooted binary tree"):
            collate_records(PackedRecords.from_records([bytes(bad)] + records[1:]))
    crowded = bytearray(records[0])
    crowded[first_edge : first_edge + 8] = bytes([5, 6] * 4)  # four edges at node 5
    with pytest.raises(ValueError, match="record 0: its arrays do not form"):
        collate_records(PackedRecords.from_records([bytes(crowded)] + records[1:]))


def test_damaged_records_give_the_oracle_batch_or_an_error(simulated):
    """Random byte damage: the verified pass either names a record or equals the oracle on the decoded
    records. The learner's (unverified) pass may read a record whose stored taken row no longer matches its
    state, and only such a record: one the insert check refuses."""
    records = episodes(simulated, EnvConfig(horizon=6), 12, seed=13, labels=True)
    rng = np.random.default_rng(14)
    refused, trusted = 0, 0
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
        try:
            verified = on_device(collate_records(packed, verify=True)[0], "cpu")
        except ValueError:
            verified = None
        if verified is not None:
            assert reference is not None, f"trial {trial}: the verified pass read a batch the oracle refuses"
            assert_same(verified, reference)
        try:
            fast = on_device(collate_records(packed)[0], "cpu")
        except ValueError:
            refused += 1
            continue
        if reference is None:
            with pytest.raises(ValueError):
                check_records(packed)
            trusted += 1
        elif verified is not None:
            assert_same(fast, reference)
    assert 0 < refused < 300 and trusted > 0  # both cases met


def test_the_insert_check_refuses_non_finite_values_and_bad_discounts(simulated):
    good = episodes(simulated, EnvConfig(horizon=6), 6, seed=15, labels=True)
    check_records(PackedRecords.from_records(good))
    first = decode_transition(good[0])
    lengths = first.next_obs.lengths.copy()
    lengths[2] = np.nan
    nan_tree = dataclasses.replace(first, next_obs=dataclasses.replace(first.next_obs, lengths=lengths))
    bad = {
        "NaN or infinite": [
            encode_transition(nan_tree),
            encode_transition(dataclasses.replace(first, reward=float("inf"))),
            encode_transition(
                dataclasses.replace(first, next_labels=np.full(first.next_obs.n_actions, np.nan, np.float32))
            ),
        ],
        "discount outside": [encode_transition(dataclasses.replace(first, discount=1.5))],
    }
    for message, records in bad.items():
        for record in records:
            with pytest.raises(ValueError, match=f"record 3: .*{message}"):
                check_records(PackedRecords.from_records(good[:3] + [record]))


def test_observation_records_equal_the_oracle(ds_reference, simulated):
    """Inference requests carry observation records; the compiled pass gives what collating the features
    gives."""
    ds1 = load_alignment(ds_reference("DS1", "JC")["alignment"])
    for alignment, config in (
        (simulated, EnvConfig()),
        (ds1, EnvConfig(radius=4)),
        (simulated, EnvConfig(features="basic")),
    ):
        records = [
            encode_observation(decode_transition(r).next_obs)
            for r in episodes(alignment, dataclasses.replace(config, horizon=5), 9, seed=16)
        ]
        assert all(r[5] in (1, 2) for r in records)
        graphs, actions, rich = collate_states(PackedRecords.from_records(records))
        assert rich == (config.features == "rich")
        reference = collate_observations([decode_observation(r) for r in records])
        assert_same(graphs, reference[0], "graphs")
        assert_same(actions, reference[1], "actions")
    with pytest.raises(ValueError, match="state 2 of 3: not a phylorl record"):
        collate_states(PackedRecords.from_records(records[:2] + [records[0][:-4]]))
    with pytest.raises(ValueError, match="trailing"):
        decode_observation(records[0] + b"\x00")
    transition = episodes(simulated, EnvConfig(horizon=3), 1, seed=17)[0]
    with pytest.raises(ValueError, match="not a phylorl observation record"):
        decode_observation(transition)


def test_a_state_without_a_move_is_named():
    """A tree of 3 leaves has no SPR move: nothing to act on."""
    obs = random_observation(3, np.random.default_rng(0))
    assert obs.n_actions == 0
    good = encode_observation(random_observation(6, np.random.default_rng(1)))
    with pytest.raises(ValueError, match="state 1 of 2: it has no move to choose from"):
        collate_states(PackedRecords.from_records([good, encode_observation(obs)]))


def test_compile_kernels_runs_every_record_pass_on_environment_records():
    assert compile_kernels(seed=1) == 4


def _damage_ranked_counts(record: bytes, at: int) -> bytes:
    """``record`` with the ranked parsimony changes of the observation at byte ``at`` miscounted: one move
    moved from the first value's count to the second's (the sum unchanged)."""
    buf, arrays = np.frombuffer(record, np.uint8), np.zeros(6, np.int64)
    assert observation_header(buf, at, len(buf), arrays)[0]
    deltas = array_header(buf, arrays[3], len(buf))
    payload = int(deltas[6])
    assert deltas[1] == 2 and buf[payload + 4] == 5  # ranked, with uint8 counts
    counts_at = payload + 5 + 2 * int(buf[payload : payload + 4].view(np.uint32)[0])
    bad = bytearray(record)
    bad[counts_at], bad[counts_at + 1] = bad[counts_at] + 1, bad[counts_at + 1] - 1
    return bytes(bad)


def test_ranked_counts_are_read_on_trust_only_where_the_insert_check_made_sure_of_them(simulated):
    """A record whose stored counts do not hold: the learner's pass reads them as stored; the insert check,
    the verified pass and the decoder refuse the record, and the endpoint refuses such a state."""
    records = episodes(simulated, EnvConfig(horizon=8), 8, seed=23)
    arrays = np.zeros(6, np.int64)
    second = observation_header(np.frombuffer(records[0], np.uint8), 38, len(records[0]), arrays)[5]
    bad = _damage_ranked_counts(records[0], second)  # the next state's
    good = collate_records(PackedRecords.from_records(records))[0]
    packed = PackedRecords.from_records([bad] + records[1:])
    read = collate_records(packed)[0]
    sizes = good.next_actions.sizes.tolist()
    changed = [
        not torch.equal(a, b)
        for a, b in zip(
            on_device(read, "cpu").next_actions.meta.split(sizes),
            on_device(good, "cpu").next_actions.meta.split(sizes),
        )
    ]
    assert changed == [True] + [False] * (len(records) - 1)
    with pytest.raises(ValueError, match="record 0: its parsimony changes"):
        collate_records(packed, verify=True)
    with pytest.raises(ValueError, match="record 0: its parsimony changes"):
        check_records(packed)
    with pytest.raises(ValueError, match="ranked"):
        decode_transition(bad)
    state = encode_observation(decode_transition(records[0]).next_obs)
    collate_states(PackedRecords.from_records([state]))
    bad_state = _damage_ranked_counts(state, 5)
    with pytest.raises(ValueError, match="state 0 of 1: its parsimony changes"):
        collate_states(PackedRecords.from_records([bad_state]))
    with pytest.raises(ValueError, match="ranked"):
        decode_observation(bad_state)


def test_the_host_expansion_knows_the_rich_layout_and_reads_any_other():
    """``expand_moves`` writes the rich layout row by row and any other layout a column at a time: both equal
    the tensor gathers."""
    from phylorl.records.moves import RICH_LAYOUT, expand_moves

    rng = np.random.default_rng(0)
    tables = [rng.normal(size=(30, w)).astype(np.float32) for w in (6, 4, 3)]
    walk_slot, walk_own = (
        rng.integers(0, 30, 40).astype(np.int32),
        rng.normal(size=(40, 2)).astype(np.float32),
    )
    lengths = np.array([3, 0, 7, 1, 20, 19])  # 50 moves; blocks overlap in the walk as a state's do
    blocks = np.stack([rng.integers(0, 30, 6), rng.integers(0, 20, 6), lengths], 1).astype(np.int32)
    shared_row, slot_node = rng.integers(0, 30, 50).astype(np.int32), rng.integers(0, 10, 30)
    arrays = (slot_node, *tables, walk_slot, walk_own, blocks, shared_row)
    for columns in (RICH_LAYOUT, tuple(rng.permutation(15))):
        compact = CompactActions(
            *map(torch.from_numpy, (*arrays, np.array(columns))), sizes=torch.tensor([20, 30]), uniform=None
        )
        nodes, meta = expand_moves(arrays, np.array(columns))
        reference = expand_actions(compact)
        assert np.array_equal(nodes, reference.nodes.numpy())
        assert meta.tobytes() == reference.meta.numpy().tobytes()
        first = (
            np.repeat(blocks[:, 1], lengths)
            + np.arange(50)
            - np.repeat(np.cumsum(lengths) - lengths, lengths)
        )
        assert np.array_equal(nodes[:, 2], walk_slot[first] // 3)  # each block is a run of walk rows
        assert reference.states.index.tolist() == [0] * 20 + [1] * 30 and reference.states.count == 2
