"""Compiled parsimony columns of the rich move features (columns 10-12, :mod:`phylorl.records.features`).

Each move's parsimony change gives three columns: the relative change, the change above the best move's, and
the move's rank among the state's moves. :func:`parsimony_table` writes them as one row per distinct change
(the learner's compact batch), :func:`parsimony_one` for one move (a record's taken row). A record stores a
state's changes ranked (the distinct values ascending, how many moves hold each, one small index per move:
:mod:`phylorl.records.arrays`); :func:`stored_parsimony_table` reads that form in place, without writing the
changes out first, and gives the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .reader import FLOAT32, INT16, ITEMSIZE, RANKED, UINT8, int_at, ranked_index, unsigned_at


@njit(cache=True, nogil=True)
def parsimony_table(deltas, parsimony_length, table, rows, first):
    """Columns 10-12 of the moves with parsimony changes ``deltas`` (float64 or float32 ``[A]``) as distinct
    rows of ``table`` (float32 ``[., 3]``, written from row ``first``), and each move's row into ``rows[i]``
    (``first`` included); returns the rows written (at most ``A``). Ranks are counted exactly, with a table
    per distinct change when the changes are whole numbers in a short range (Fitch changes of weighted sites
    are; one row per distinct change), by sorting otherwise (one row per move)."""
    n = deltas.shape[0]
    if n == 0:
        return 0
    lo, hi, whole = deltas[0], deltas[0], True
    for d in deltas:
        lo, hi = min(lo, d), max(hi, d)
        whole = whole and d == np.floor(d)
    low = np.float64(lo)
    if whole and hi - lo <= 4 * n + 64:
        counts = np.zeros(int(hi - lo) + 1, np.int64)
        for d in deltas:
            counts[int(d - lo)] += 1
        row = np.empty(counts.shape[0], np.int32)  # one table row per whole change lo + j that a move has
        below, written = 0, 0
        for j in range(counts.shape[0]):
            if counts[j]:
                row[j] = first + written
                parsimony_row(table, first + written, low + j, low, below, counts[j], n, parsimony_length, 0)
                written += 1
            below += counts[j]
        for i in range(n):
            rows[i] = row[int(deltas[i] - lo)]
        return written
    ordered = np.sort(deltas)
    for i in range(n):
        below = np.searchsorted(ordered, deltas[i], side="left")
        equal = np.searchsorted(ordered, deltas[i], side="right") - below
        parsimony_row(table, first + i, np.float64(deltas[i]), low, below, equal, n, parsimony_length, 0)
        rows[i] = first + i
    return n


@njit(cache=True, nogil=True)
def parsimony_one(out, row, deltas, i, parsimony_length):
    """Columns 10-12 of move ``i`` alone into ``out[row]`` (one pass over the changes)."""
    lowest, below, equal = deltas[i], 0, 0
    for d in deltas:
        lowest = min(lowest, d)
        below += d < deltas[i]
        equal += d == deltas[i]
    n, delta = deltas.shape[0], np.float64(deltas[i])
    parsimony_row(out, row, delta, np.float64(lowest), below, equal, n, parsimony_length, 10)


@njit(cache=True, nogil=True)
def parsimony_row(out, i, delta, lowest, below, equal, n, parsimony_length, at):
    """Columns 10-12 (into ``out[i, at:at + 3]``) of a move with parsimony change ``delta``: relative
    change, change above the best move's (clipped), and its rank among the state's ``n`` moves,
    0 (best) to 1 (worst), ties sharing their mean rank."""
    out[i, at] = delta * 100.0 / max(parsimony_length, 1.0)
    out[i, at + 1] = min(delta - lowest, 20.0) / 5.0
    out[i, at + 2] = (below + 0.5 * (equal - 1)) / max(n - 1, 1)


@njit(cache=True, nogil=True)
def _ranked_counts(buf, header):
    """``(values, counts)`` of a ranked array (:mod:`phylorl.records.arrays`, encoding 2): its distinct values
    (ascending) and how many elements hold each, as stored; the index is checked to be in range (empty counts
    otherwise)."""
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
        index = buf[start : start + n]
        for i in range(n):  # one pass of vector code
            largest = max(largest, index[i])
    else:
        for i in range(n):
            largest = max(largest, unsigned_at(buf, start + 2 * i, 2))
    return largest


@njit(cache=True, nogil=True)
def ranked_valid(buf, header):
    """Whether an array stored ranked (``header`` from :func:`~phylorl.records.reader.array_header`) holds
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
    """:func:`parsimony_table` of parsimony changes stored ranked (``header`` from
    :func:`~phylorl.records.reader.array_header`), read in place: one row per stored value (entry ``e`` at row
    ``first + e``; the values are distinct, so each row is the row :func:`parsimony_table` writes for that
    value, bit for bit), and each move's row is its stored index plus ``first``. Returns the rows written, or
    -1 when the changes are stored another way, have more entries than moves or an index out of range (then
    read them out and call :func:`parsimony_table`)."""
    if header[1] != RANKED or header[0] != FLOAT32 or not UINT8 <= header[2] <= UINT8 + 1:
        return -1
    # values ascending: a value's rank is the counts before it
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
            value = np.float64(int_at(buf, values + 2 * e, INT16))
            parsimony_row(table, first + e, value, lowest, below, count, n, parsimony_length, 0)
        else:
            table[first + e, 0] = table[first + e, 1] = table[first + e, 2] = 0.0
        below += count
    if stored == UINT8:  # on views and in int32, so that it compiles to vector code (15x faster)
        index, out, base = buf[start : start + n], rows[:n], np.int32(first)
        for i in range(n):
            out[i] = np.int32(index[i]) + base
    else:
        for i in range(n):
            rows[i] = first + unsigned_at(buf, start + 2 * i, 2)
    return entries
