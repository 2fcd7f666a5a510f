"""Compiled reading of :mod:`phylorl.wire.record` records, for decoders that write straight into
batch arrays (:mod:`phylorl.env.batch_kernels`).

Only what the tree forms need is read here: the record header, the observation headers and arrays
of the dtypes the tree forms store. Anything else (the arrays form, stored node features, an array
of an unexpected dtype or shape, a malformed or truncated record) makes the reader report the record
as not readable here, and the caller decodes it with :func:`phylorl.wire.record.decode_transition`,
which reads every form and names what is wrong with a corrupt record.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import arrays, record
from .record import MAGIC, OBSERVATION_MAGIC

# The record format's own constants (phylorl.wire.record), as compiled code reads them.
HEADER_SIZE = record._HEADER.size
ITEMSIZE = np.array([dt.itemsize for dt in arrays._DTYPES], np.int64)  # by dtype code
SIGNED = np.array([dt.kind == "i" for dt in arrays._DTYPES], np.bool_)
FLOAT32, FLOAT64 = arrays._CODE[np.dtype("<f4").str], arrays._CODE[np.dtype("<f8").str]
INT16, UINT8 = arrays._CODE[np.dtype("<i2").str], arrays._CODE[np.dtype("|u1").str]  # uint8, 16, 32 follow
DICTIONARY, RANKED = arrays._DICTIONARY, arrays._RANKED
TREE_FORM, RICH_FORM = record._TREE_FORM, record._RICH_FORM
DEDUPE, LEAF_FEATURES = record._DEDUPE, record._LEAF_FEATURES
TERMINAL, LABELLED, TAKEN = record._TERMINAL, record._LABELLED, record._TAKEN
_FIRST_VERSION, _LAST_VERSION = min(record.READABLE_VERSIONS), max(record.READABLE_VERSIONS)  # a range: 3 to 5
_TAKEN_VERSION = 4  # the first version with a taken row
_MAGIC = np.frombuffer(MAGIC, np.uint8)
_OBSERVATION_MAGIC = np.frombuffer(OBSERVATION_MAGIC, np.uint8)


@njit(cache=True, nogil=True, inline="always")
def unsigned_at(buf, pos, size):
    """The little-endian unsigned integer of ``size`` bytes at ``buf[pos]``."""
    value = 0
    for b in range(size):
        value |= np.int64(buf[pos + b]) << (8 * b)
    return value


@njit(cache=True, nogil=True)
def int_at(buf, pos, code):
    """The integer element of dtype ``code`` (bool or an integer type) at ``buf[pos]``."""
    size = ITEMSIZE[code]
    value = unsigned_at(buf, pos, size)
    if SIGNED[code] and size < 8 and value >= np.int64(1) << (8 * size - 1):
        value -= np.int64(1) << (8 * size)
    return value


@njit(cache=True, nogil=True, inline="always")
def array_header(buf, pos, end):
    """``(code, encoding, stored, ndim, n0, n1, payload, next)`` of the array at ``pos``; ``next`` is
    -1 when the header is malformed, has more than two axes or runs past ``end``."""
    bad = (0, 0, 0, 0, 0, 0, 0, -1)
    if pos + 4 > end:
        return bad
    code, encoding, stored, ndim = buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]
    if code >= 12 or stored >= 12 or encoding > RANKED or ndim > 2 or pos + 4 + 4 * ndim > end:
        return bad
    n0 = unsigned_at(buf, pos + 4, 4) if ndim >= 1 else 1
    n1 = unsigned_at(buf, pos + 8, 4) if ndim == 2 else 1
    payload = pos + 4 + 4 * ndim
    size = n0 * n1
    if encoding == 0:
        after = payload + size * ITEMSIZE[stored]
    elif encoding == 1:
        if payload + 4 > end:
            return bad
        after = payload + 4 + unsigned_at(buf, payload, 4) * ITEMSIZE[code] + size * ITEMSIZE[stored]
    else:  # ranked: the counts' dtype an unsigned type, the index's too
        if payload + 5 > end or not (UINT8 <= buf[payload + 4] <= UINT8 + 2 and UINT8 <= stored <= UINT8 + 1):
            return bad
        after = payload + 5 + unsigned_at(buf, payload, 4) * (2 + ITEMSIZE[buf[payload + 4]]) + size * ITEMSIZE[stored]
    if after > end:
        return bad
    return code, encoding, stored, ndim, n0, n1, payload, after


@njit(cache=True, nogil=True)
def read_ints(buf, header, out):
    """Fill ``out`` (flat, of the array's size) with an integer array stored by cast; False when it is not one."""
    code, encoding, stored, _, n0, n1, payload, _ = header
    if encoding != 0 or not 1 <= stored <= 8 or n0 * n1 != out.shape[0]:
        return False
    step = ITEMSIZE[stored]
    if step == 1:  # node indices: one byte each, signed when the table holds -1 padding
        if SIGNED[stored]:
            for i in range(out.shape[0]):
                out[i] = np.int8(buf[payload + i])
        else:
            for i in range(out.shape[0]):
                out[i] = buf[payload + i]
        return True
    for i in range(out.shape[0]):
        out[i] = int_at(buf, payload + i * step, stored)
    return True


@njit(cache=True, nogil=True)
def read_floats(buf, header, out, code):
    """Fill ``out`` (flat, of the array's size) with a float array of dtype ``code`` (float32 or
    float64), stored as it is, as a dictionary or ranked; False when it is something else or corrupt."""
    kind, encoding, stored, _, n0, n1, payload, _ = header
    n = n0 * n1
    if kind != code or n != out.shape[0]:
        return False
    if encoding == 0:
        if stored != code:
            return False
        values = buf[payload: payload + n * ITEMSIZE[code]].view(out.dtype)
        for i in range(n):  # a loop: numba's slice assignment costs more than these few elements
            out[i] = values[i]
        return True
    count = unsigned_at(buf, payload, 4)
    if encoding == RANKED:  # the values int16, ascending; the counts are not read here
        start = ranked_index(header, buf)
        for i in range(n):
            index = buf[start + i] if stored == UINT8 else unsigned_at(buf, start + 2 * i, 2)
            if index >= count:
                return False
            out[i] = int_at(buf, payload + 5 + 2 * index, INT16)
        return True
    table = buf[payload + 4: payload + 4 + count * ITEMSIZE[code]].view(out.dtype)
    if SIGNED[stored] or not 5 <= stored <= 8:
        return False
    start, step = payload + 4 + count * ITEMSIZE[code], ITEMSIZE[stored]
    if step == 1:
        for i in range(n):
            index = buf[start + i]
            if index >= count:
                return False
            out[i] = table[index]
        return True
    for i in range(n):
        index = unsigned_at(buf, start + i * step, step)
        if index >= count:
            return False
        out[i] = table[index]
    return True


@njit(cache=True, nogil=True)
def ranked_index(header, buf):
    """Where the element indices of a ranked array (encoding 2, ``header`` from :func:`array_header`) start."""
    payload = header[6]
    return payload + 5 + unsigned_at(buf, payload, 4) * (2 + ITEMSIZE[buf[payload + 4]])


@njit(cache=True, nogil=True)
def record_header(buf, start, end):
    """``(ok, flags, action, reward, discount, policy_version, body)`` of the record in ``buf[start:end]`` (not ok
    for a version this code does not read, or a taken row in a version without one)."""
    if end - start < HEADER_SIZE or not _readable(buf[start + 4]):
        return False, 0, 0, 0.0, 0.0, 0, 0
    for j in range(4):
        if buf[start + j] != _MAGIC[j]:
            return False, 0, 0, 0.0, 0.0, 0, 0
    flags = buf[start + 5]
    if flags & TAKEN and buf[start + 4] < _TAKEN_VERSION:
        return False, 0, 0, 0.0, 0.0, 0, 0
    action = int_at(buf, start + 6, 4)
    reward = buf[start + 14: start + 22].view(np.float64)[0]
    discount = buf[start + 22: start + 30].view(np.float64)[0]
    version = int_at(buf, start + 30, 4)
    return True, flags, action, reward, discount, version, start + HEADER_SIZE


@njit(cache=True, nogil=True, inline="always")
def _readable(version):
    return _FIRST_VERSION <= version <= _LAST_VERSION


@njit(cache=True, nogil=True)
def observation_record_header(buf, start, end):
    """``(ok, body)`` of the observation record in ``buf[start:end]``."""
    if end - start < 5 or not _readable(buf[start + 4]):
        return False, 0
    for j in range(4):
        if buf[start + j] != _OBSERVATION_MAGIC[j]:
            return False, 0
    return True, start + 5


@njit(cache=True, nogil=True)
def observation_header(buf, pos, end, arrays):
    """Locate the tree-form observation at ``pos``: ``(ok, form, n_leaves, radius, flags, next)`` and
    the positions of its array headers in ``arrays`` (neighbors, edges, lengths, then for the rich
    form deltas, parsimony length and support). Not ok for the arrays form and stored node features."""
    if pos + 10 > end:
        return False, 0, 0, 0, 0, -1
    form = buf[pos]
    if form != TREE_FORM and form != RICH_FORM:
        return False, 0, 0, 0, 0, -1
    n_leaves = unsigned_at(buf, pos + 1, 4)
    radius = int_at(buf, pos + 5, 3)
    flags = buf[pos + 9]
    if not flags & LEAF_FEATURES:
        return False, 0, 0, 0, 0, -1
    pos += 10
    for a in range(3 if form == TREE_FORM else 6):
        arrays[a] = pos
        pos = array_header(buf, pos, end)[7]
        if pos < 0:
            return False, 0, 0, 0, 0, -1
    return True, form, n_leaves, radius, flags, pos
