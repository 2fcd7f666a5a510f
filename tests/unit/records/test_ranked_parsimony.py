"""Parsimony columns read in place from a record's ranked parsimony changes equal those of the changes written
out, bit for bit; changes stored another way are left to the written-out path."""

from __future__ import annotations

import numpy as np
import pytest
from oracles.records import decode_array

from phylorl.records.arrays import encode_array as _encode_array
from phylorl.records.arrays import encode_ranked
from phylorl.records.parsimony import _ranked_counts, parsimony_table, ranked_valid, stored_parsimony_table
from phylorl.records.reader import FLOAT32, array_header, ranked_index, read_floats


def _stored(deltas: np.ndarray, ranked: bool = False) -> tuple[np.ndarray, tuple]:
    """The record bytes of ``deltas`` as the encoder stores them (as a dictionary, or ranked as version 5
    stores parsimony changes), and their array header."""
    parts: list[bytes] = []
    (encode_ranked if ranked else _encode_array)(np.asarray(deltas, np.float32), "deltas", parts)
    buf = np.frombuffer(b"".join(parts), np.uint8)
    return buf, array_header(buf, 0, buf.shape[0])


def _changes(kind: str, rng) -> np.ndarray:
    return {
        "actor-like": rng.integers(-12, 40, 1122),  # Fitch changes of one state: a few dozen values
        "one value": np.full(400, 3.0),
        "wide index": rng.permutation(np.arange(-200, 400)).repeat(4),  # 600 values: uint16 indices
        "negative": -rng.integers(1, 9, 300).astype(np.float64),
    }[kind].astype(np.float32)


@pytest.mark.parametrize("kind", ["actor-like", "one value", "wide index", "negative"])
def test_the_stored_table_equals_the_written_out_changes(kind):
    rng = np.random.default_rng(7)
    deltas = _changes(kind, rng)
    buf, header = _stored(deltas, ranked=True)
    assert header[1] == 2, "stored ranked"
    assert ranked_valid(buf, header)
    assert header[2] == (6 if kind == "wide index" else 5)  # uint16 / uint8 indices
    table, rows = np.zeros((len(deltas) + 5, 3), np.float32), np.zeros(len(deltas), np.int32)
    parsimony_table(deltas, 812.0, table, rows, 5)
    stored_table, stored_rows = np.zeros_like(table), np.zeros_like(rows)
    entries = len(np.unique(deltas))
    # a row an entry
    assert stored_parsimony_table(buf, header, 812.0, stored_table, stored_rows, 5) == entries
    assert stored_rows.min() == 5 and stored_rows.max() == 5 + entries - 1
    assert stored_table[stored_rows].tobytes() == table[rows].tobytes()  # every move's columns


@pytest.mark.parametrize("value", [0.5, -0.0, np.nan, np.inf])
def test_changes_stored_another_way_are_left_to_the_written_out_path(value):
    """Fractional changes, -0.0, NaN and infinities cannot be ranked exactly: stored as a dictionary, not read
    in place; nor are arrays too small to rank."""
    deltas = _changes("actor-like", np.random.default_rng(3))
    deltas[17] = value
    buf, header = _stored(deltas, ranked=True)
    assert header[1] == 1
    assert (
        stored_parsimony_table(
            buf, header, 812.0, np.zeros((1200, 3), np.float32), np.zeros(1122, np.int32), 0
        )
        == -1
    )
    buf, header = _stored(np.arange(10, dtype=np.float32), ranked=True)
    assert header[1] == 0
    assert (
        stored_parsimony_table(buf, header, 1.0, np.zeros((10, 3), np.float32), np.zeros(10, np.int32), 0)
        == -1
    )


@pytest.mark.parametrize("kind", ["actor-like", "one value", "wide index", "negative"])
def test_ranked_arrays_read_as_numpy_reads_them_and_count_what_they_hold(kind):
    deltas = _changes(kind, np.random.default_rng(11))
    buf, header = _stored(deltas, ranked=True)
    assert header[7] == buf.shape[0]  # the header's size of the ranked payload
    back, end = decode_array(memoryview(buf.tobytes()), 0)
    assert end == buf.shape[0] and back.dtype == np.float32 and back.tobytes() == deltas.tobytes()
    out = np.zeros(len(deltas), np.float32)
    assert read_floats(buf, header, out, FLOAT32) and out.tobytes() == deltas.tobytes()
    values, counts = _ranked_counts(buf, header)
    want_values, want_counts = np.unique(deltas, return_counts=True)
    assert values.tobytes() == want_values.tobytes() and np.array_equal(counts, want_counts)


def _damaged(kind: str) -> tuple[np.ndarray, tuple]:
    """Ranked ``actor-like`` changes damaged one way; each still decodes in the compiled readers' bounds."""
    buf, header = _stored(_changes("actor-like", np.random.default_rng(13)), ranked=True)
    buf, payload = buf.copy(), header[6]
    count = int(buf[payload : payload + 4].view(np.uint32)[0])
    counts_at, index_at = payload + 5 + 2 * count, ranked_index(header, buf)
    if kind == "a count":
        buf[counts_at + 3] += 1
    elif kind == "two counts swapped":  # their sum unchanged
        buf[counts_at], buf[counts_at + 1] = buf[counts_at + 1] + 1, buf[counts_at] - 1
    elif kind == "values out of order":
        buf[payload + 5 : payload + 9] = buf[payload + 5 : payload + 9].reshape(2, 2)[::-1].reshape(-1)
    elif kind == "an index out of range":
        buf[index_at + 9] = 250
    elif kind == "64-bit indices":  # a dtype code the encoder never writes
        buf[2] = 8
    return buf, header


@pytest.mark.parametrize(
    "kind",
    ["a count", "two counts swapped", "values out of order", "an index out of range", "64-bit indices"],
)
def test_damaged_ranked_arrays_are_refused_by_the_checks(kind):
    buf, header = _damaged(kind)
    if kind == "64-bit indices":
        header = array_header(buf, 0, buf.shape[0])
        assert header[7] < 0  # not an array the compiled readers read
    assert not ranked_valid(buf, header)
    with pytest.raises(ValueError, match="ranked"):
        decode_array(memoryview(buf.tobytes()), 0)
    if kind == "an index out of range":  # never read, even on trust
        assert _ranked_counts(buf, header)[1].size == 0
        assert (
            stored_parsimony_table(
                buf, header, 1.0, np.zeros((1200, 3), np.float32), np.zeros(1122, np.int32), 0
            )
            == -1
        )
        assert not read_floats(buf, header, np.zeros(1122, np.float32), FLOAT32)


@pytest.mark.parametrize("value", [0.5, -0.0, np.nan, np.inf, 40000.0])
def test_changes_ranking_cannot_hold_exactly_are_stored_as_before(value):
    deltas = _changes("actor-like", np.random.default_rng(3))
    deltas[17] = value
    buf, header = _stored(deltas, ranked=True)
    assert header[1] == 1  # a dictionary: every bit pattern kept
    assert decode_array(memoryview(buf.tobytes()), 0)[0].tobytes() == deltas.tobytes()
    small, header = _stored(np.arange(10, dtype=np.float32), ranked=True)
    assert header[1] == 0
