"""Compiled parsimony columns of the rich move features (columns 10-12, :mod:`phylorl.env.features`).

Each move's parsimony change gives three columns: the relative change, the change above the best move's,
and the move's rank among the state's moves. :func:`parsimony_table` writes them as one row per distinct
change (the learner's compact batch) and :func:`parsimony_columns` per move (the environment). A stored
record keeps a state's changes as a dictionary (the distinct values and one small index per move,
:mod:`phylorl.wire.record`); :func:`stored_parsimony_table` and :func:`stored_parsimony_one` read that
form in place, without writing the changes out first, and give the same bits
(``tests/unit/env/test_parsimony_kernels.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from phylorl.wire.record_reader import (
    DICTIONARY, FLOAT32, INT16, ITEMSIZE, RANKED, UINT8, int_at, ranked_index, unsigned_at,
)


@njit(cache=True, nogil=True)
def parsimony_columns(out, deltas, parsimony_length):
    """Columns 10-12 of every move into ``out[:, 10:13]``, from the moves' parsimony changes (float64
    ``[A]``; see :func:`parsimony_table`)."""
    table = np.empty((deltas.shape[0], 3), np.float32)
    rows = np.empty(deltas.shape[0], np.int32)
    parsimony_table(deltas, parsimony_length, table, rows, 0)
    for i in range(deltas.shape[0]):
        out[i, 10], out[i, 11], out[i, 12] = table[rows[i], 0], table[rows[i], 1], table[rows[i], 2]


@njit(cache=True, nogil=True)
def parsimony_table(deltas, parsimony_length, table, rows, first):
    """Columns 10-12 of the moves with parsimony changes ``deltas`` (float64 or float32 ``[A]``) as distinct rows
    of ``table`` (float32 ``[., 3]``, written from row ``first``), and each move's row into ``rows[i]``
    (``first`` included); returns the rows written (at most ``A``). Ranks are counted exactly, with a
    table per distinct change when the changes are whole numbers in a short range (Fitch changes of
    weighted sites are; one row per distinct change), by sorting otherwise (one row per move)."""
    n = deltas.shape[0]
    if n == 0:
        return 0
    lo, hi, whole = deltas[0], deltas[0], True
    for d in deltas:
        lo, hi = min(lo, d), max(hi, d)
        whole = whole and d == np.floor(d)
    if whole and hi - lo <= 4 * n + 64:
        counts = np.zeros(int(hi - lo) + 1, np.int64)
        for d in deltas:
            counts[int(d - lo)] += 1
        row, written = _value_rows(counts, lo, n, parsimony_length, table, first)
        for i in range(n):
            rows[i] = row[int(deltas[i] - lo)]
        return written
    ordered = np.sort(deltas)
    for i in range(n):
        below = np.searchsorted(ordered, deltas[i], side="left")
        equal = np.searchsorted(ordered, deltas[i], side="right") - below
        parsimony_row(table, first + i, np.float64(deltas[i]), np.float64(lo), below, equal, n, parsimony_length, 0)
        rows[i] = first + i
    return n


@njit(cache=True, nogil=True)
def _value_rows(counts, lo, n, parsimony_length, table, first):
    """One table row per whole change ``lo + j`` that ``counts[j]`` moves have (of ``n``), from row ``first`` on:
    ``(row of each j, rows written)``."""
    row = np.empty(counts.shape[0], np.int32)
    below, written = 0, 0
    for j in range(counts.shape[0]):
        if counts[j]:
            row[j] = first + written
            parsimony_row(table, first + written, np.float64(lo) + j, np.float64(lo), below, counts[j], n,
                          parsimony_length, 0)
            written += 1
        below += counts[j]
    return row, written


@njit(cache=True, nogil=True)
def parsimony_one(out, row, deltas, i, parsimony_length):
    """Columns 10-12 of move ``i`` alone into ``out[row]`` (one pass over the changes)."""
    lowest, below, equal = deltas[i], 0, 0
    for d in deltas:
        lowest = min(lowest, d)
        below += d < deltas[i]
        equal += d == deltas[i]
    parsimony_row(out, row, np.float64(deltas[i]), np.float64(lowest), below, equal, deltas.shape[0], parsimony_length,
                  10)


@njit(cache=True, nogil=True)
def parsimony_row(out, i, delta, lowest, below, equal, n, parsimony_length, at):
    """Columns 10-12 (into ``out[i, at:at + 3]``) of a move with parsimony change ``delta``: relative
    change, change above the best move's (clipped), and its rank among the state's ``n`` moves,
    0 (best) to 1 (worst), ties sharing their mean rank."""
    out[i, at] = delta * 100.0 / max(parsimony_length, 1.0)
    out[i, at + 1] = min(delta - lowest, 20.0) / 5.0
    out[i, at + 2] = (below + 0.5 * (equal - 1)) / max(n - 1, 1)


@njit(cache=True, nogil=True)
def stored_counts(buf, header):
    """``(values, counts)`` of a float32 array stored as a dictionary in a record (``header`` from
    :func:`~phylorl.wire.record_reader.array_header`): its distinct values and how many elements hold each.
    ``counts`` is empty when the array is stored another way, an index is out of range, or a value that
    occurs is not finite or is ``-0.0`` (then the order of a scan over the elements could matter, and the
    caller reads the elements instead). A ranked array's counts are read as stored, not counted
    (:func:`ranked_valid` checks them)."""
    kind, encoding, stored, _, n0, n1, payload, _ = header
    none = (np.empty(0, np.float32), np.empty(0, np.int64))
    if kind != FLOAT32 or not DICTIONARY <= encoding <= RANKED or not UINT8 <= stored <= UINT8 + 1:
        return none
    n, count, step = n0 * n1, unsigned_at(buf, payload, 4), stored - UINT8 + 1
    if encoding == RANKED:  # the counts are stored (and the replay's insert check makes sure they hold)
        return _ranked_counts(buf, header)
    values = buf[payload + 4: payload + 4 + 4 * count].view(np.float32)
    start = payload + 4 + 4 * count
    counts = np.zeros(count, np.int64)
    if step == 1:
        index = buf[start: start + n]
        largest = 0
        for i in range(n):  # the range check in one pass of vector code
            largest = max(largest, index[i])
        if n and largest >= count:
            return none
        # eight tallies of every byte value, so that runs of one index do not wait on the last increment
        tally = np.zeros((8, 256), np.int32)
        for i in range(n // 8):
            b = 8 * i
            tally[0, index[b]] += 1
            tally[1, index[b + 1]] += 1
            tally[2, index[b + 2]] += 1
            tally[3, index[b + 3]] += 1
            tally[4, index[b + 4]] += 1
            tally[5, index[b + 5]] += 1
            tally[6, index[b + 6]] += 1
            tally[7, index[b + 7]] += 1
        for i in range(n - n % 8, n):
            tally[0, index[i]] += 1
        for e in range(min(count, 256)):  # a byte reaches no entry past 255
            total = 0
            for k in range(8):
                total += tally[k, e]
            counts[e] = total
    else:
        for i in range(n):
            index = unsigned_at(buf, start + 2 * i, 2)
            if index >= count:
                return none
            counts[index] += 1
    for e in range(count):
        if counts[e] and (not np.isfinite(values[e]) or (values[e] == 0 and math.copysign(1.0, values[e]) < 0)):
            return none
    return values, counts


@njit(cache=True, nogil=True)
def _ranked_counts(buf, header):
    """:func:`stored_counts` of a ranked array (:mod:`phylorl.wire.arrays`, encoding 2): its values (ascending) and
    counts as stored; the index is checked to be in range (empty counts otherwise)."""
    _, _, stored, _, n0, n1, payload, _ = header
    n, count, count_code = n0 * n1, unsigned_at(buf, payload, 4), buf[payload + 4]
    values, counts = np.empty(count, np.float32), np.empty(count, np.int64)
    for e in range(count):
        values[e] = int_at(buf, payload + 5 + 2 * e, INT16)
        counts[e] = unsigned_at(buf, payload + 5 + 2 * count + e * ITEMSIZE[count_code], ITEMSIZE[count_code])
    start = ranked_index(header, buf)
    if n and _largest_index(buf, start, n, stored) >= count:
        return np.empty(0, np.float32), np.empty(0, np.int64)
    return values, counts


@njit(cache=True, nogil=True)
def _largest_index(buf, start, n, stored):
    """The largest of ``n`` dictionary indices (``stored``: uint8 or uint16) from ``buf[start]``."""
    largest = 0
    if stored == UINT8:
        index = buf[start: start + n]
        for i in range(n):  # one pass of vector code
            largest = max(largest, index[i])
    else:
        for i in range(n):
            largest = max(largest, unsigned_at(buf, start + 2 * i, 2))
    return largest


@njit(cache=True, nogil=True)
def ranked_valid(buf, header):
    """Whether an array stored ranked (``header`` from :func:`~phylorl.wire.record_reader.array_header`) holds
    what its readers take on trust: its values strictly ascending, each count the elements that hold it, every
    index in range. True for an array stored another way (its readers check it themselves)."""
    if header[1] != RANKED or header[7] < 0:
        return header[7] >= 0
    values, counts = _ranked_counts(buf, header)
    count = unsigned_at(buf, header[6], 4)
    if counts.shape[0] != count:
        return count == 0 and header[4] * header[5] == 0
    tally = np.zeros(count, np.int64)
    start, step = ranked_index(header, buf), header[2] - UINT8 + 1
    for i in range(header[4] * header[5]):
        tally[buf[start + i] if step == 1 else unsigned_at(buf, start + 2 * i, 2)] += 1
    for e in range(count):
        if tally[e] != counts[e] or (e and values[e] <= values[e - 1]):
            return False
    return True


@njit(cache=True, nogil=True)
def stored_parsimony_table(buf, header, parsimony_length, table, rows, first):
    """:func:`parsimony_table` of parsimony changes stored as a dictionary (see :func:`stored_counts`), read in
    place: one row per dictionary entry (entry ``e`` at row ``first + e``; the dictionary holds distinct values,
    so each row is the row :func:`parsimony_table` writes for that value, bit for bit, and an entry no move
    uses gets zeros), and each move's row is its stored index plus ``first``. Returns the rows written, or -1
    when the changes are not stored that way, have more entries than moves, or are not whole numbers in a short
    range (then read them out and call :func:`parsimony_table`)."""
    if header[1] == RANKED and header[0] == FLOAT32 and UINT8 <= header[2] <= UINT8 + 1:
        return _ranked_table(buf, header, parsimony_length, table, rows, first)
    values, counts = stored_counts(buf, header)
    n, entries = header[4] * header[5], values.shape[0]
    if counts.shape[0] == 0 or entries > n:
        return -1
    lo32, hi32, seen = np.float32(0), np.float32(0), False
    for e in range(entries):
        if counts[e]:
            v = values[e]
            if v != np.floor(v):
                return -1
            lo32, hi32 = (min(lo32, v), max(hi32, v)) if seen else (v, v)
            seen = True
    if not seen or hi32 - lo32 > 4 * n + 64:
        return -1
    below = np.zeros(int(hi32 - lo32) + 2, np.int64)  # below[j]: the moves whose change is under lo + j
    for e in range(entries):
        if counts[e]:
            below[int(values[e] - lo32) + 1] += counts[e]
    for j in range(1, below.shape[0]):
        below[j] += below[j - 1]
    for e in range(entries):
        if counts[e]:  # the value is lo + j exactly (whole numbers): _value_rows' arguments
            parsimony_row(table, first + e, np.float64(values[e]), np.float64(lo32), below[int(values[e] - lo32)],
                          counts[e], n, parsimony_length, 0)
        else:
            table[first + e, 0] = table[first + e, 1] = table[first + e, 2] = 0.0
    return _entry_rows(buf, header, header[6] + 4 + 4 * entries, rows, first)


@njit(cache=True, nogil=True)
def _ranked_table(buf, header, parsimony_length, table, rows, first):
    """:func:`stored_parsimony_table` of a ranked array (values ascending: a value's rank is the counts before it),
    read straight from its bytes; -1 when an index is out of range or there are more entries than elements."""
    n, payload, stored = header[4] * header[5], header[6], header[2]
    entries, size = unsigned_at(buf, payload, 4), ITEMSIZE[buf[payload + 4]]
    start = ranked_index(header, buf)
    if entries > n or (n and _largest_index(buf, start, n, stored) >= entries):
        return -1
    values, counts = payload + 5, payload + 5 + 2 * entries
    lowest = 0.0
    for e in range(entries):
        if unsigned_at(buf, counts + e * size, size):
            lowest = np.float64(int_at(buf, values + 2 * e, INT16))
            break
    below = 0
    for e in range(entries):
        count = unsigned_at(buf, counts + e * size, size)
        if count:
            parsimony_row(table, first + e, np.float64(int_at(buf, values + 2 * e, INT16)), lowest, below,
                          count, n, parsimony_length, 0)
        else:
            table[first + e, 0] = table[first + e, 1] = table[first + e, 2] = 0.0
        below += count
    return _entry_rows(buf, header, start, rows, first)


@njit(cache=True, nogil=True)
def _entry_rows(buf, header, start, rows, first):
    """Each element's table row (its dictionary index plus ``first``, the indices from ``buf[start]``) into
    ``rows``; returns the entries."""
    n, step = header[4] * header[5], header[2] - UINT8 + 1
    if step == 1:  # on views and in int32, so that it compiles to vector code (15x faster)
        index, out, base = buf[start: start + n], rows[:n], np.int32(first)
        for i in range(n):
            out[i] = np.int32(index[i]) + base
    else:
        for i in range(n):
            rows[i] = first + unsigned_at(buf, start + 2 * i, 2)
    return unsigned_at(buf, header[6], 4)


@njit(cache=True, nogil=True)
def stored_parsimony_one(out, row, buf, header, i, parsimony_length):
    """:func:`parsimony_one` of move ``i`` of parsimony changes stored as a dictionary, read in place; False
    (nothing written) when they are not stored that way or ``i`` is out of range."""
    values, counts = stored_counts(buf, header)
    n = header[4] * header[5]
    if counts.shape[0] == 0 or not 0 <= i < n:
        return False
    start = ranked_index(header, buf) if header[1] == RANKED else header[6] + 4 + 4 * values.shape[0]
    step = header[2] - UINT8 + 1
    delta = values[buf[start + i] if step == 1 else unsigned_at(buf, start + 2 * i, 2)]
    lowest, below, equal = delta, 0, 0
    for e in range(values.shape[0]):
        if counts[e]:
            lowest = min(lowest, values[e])
            below += counts[e] if values[e] < delta else 0
            equal += counts[e] if values[e] == delta else 0
    parsimony_row(out, row, np.float64(delta), np.float64(lowest), below, equal, n, parsimony_length, 10)
    return True
