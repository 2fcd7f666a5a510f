"""Compiled reading of records (:mod:`phylorl.records.format`): headers, arrays of the dtypes the forms store,
and the check that a stored tree is an unrooted binary tree, for the passes that write straight into batch
arrays (:mod:`phylorl.records.batch`). A malformed or truncated record, or an array of an unexpected dtype or
shape, makes a reader report it as not readable.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from phylorl.phylo.spr import slot_of

from . import arrays, format
from .format import MAGIC, OBSERVATION_MAGIC, VERSION

# The format's own constants, as compiled code reads them.
HEADER_SIZE = format.HEADER.size
ITEMSIZE = np.array([dt.itemsize for dt in arrays._DTYPES], np.int64)  # by dtype code
SIGNED = np.array([dt.kind == "i" for dt in arrays._DTYPES], np.bool_)
FLOAT32, FLOAT64 = arrays._CODE[np.dtype("<f4").str], arrays._CODE[np.dtype("<f8").str]
INT16, UINT8 = arrays._CODE[np.dtype("<i2").str], arrays._CODE[np.dtype("|u1").str]  # uint8, 16, 32 follow
DICTIONARY, RANKED = arrays._DICTIONARY, arrays._RANKED
TREE_FORM, RICH_FORM = format.TREE_FORM, format.RICH_FORM
DEDUPE, LEAF_FEATURES = format.DEDUPE, format.LEAF_FEATURES
TERMINAL, LABELLED, TAKEN = format.TERMINAL, format.LABELLED, format.TAKEN
_MAGIC = np.frombuffer(MAGIC, np.uint8)
_OBSERVATION_MAGIC = np.frombuffer(OBSERVATION_MAGIC, np.uint8)
LINE = 64
"""Bytes a prefetch brings in (the cache line of x86-64 and most ARM cores)."""


@intrinsic
def _prefetch(typingctx, array, index):
    """Prefetch for reading the cache line of ``array[index]`` (a 1-d array), keeping it in all cache
    levels."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        byte = ir.IntType(8).as_pointer()
        where = builder.bitcast(builder.gep(ary.data, [args[1]]), byte)
        i32 = ir.IntType(32)
        hint = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32])
        )
        builder.call(hint, [where, i32(0), i32(3), i32(1)])  # read, keep in every level, data cache
        return context.get_dummy_value()

    return types.void(array, index), codegen


@njit(cache=True, nogil=True, inline="always")
def prefetch_range(buf, start, end):
    """Ask for the cache lines of ``buf[start:end]`` (clipped to ``buf``): LLVM's ``llvm.prefetch``, a hint
    that never faults nor changes a value. A batch's records are read twice (headers, then every byte); asking
    for the next record's lines while the current one is read overlaps their loads with work."""
    end = min(end, buf.shape[0])
    for pos in range(max(start, 0), end, LINE):
        _prefetch(buf, pos)


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
        index = payload + 5 + unsigned_at(buf, payload, 4) * (2 + ITEMSIZE[buf[payload + 4]])  # ranked_index
        after = index + size * ITEMSIZE[stored]
    if after > end:
        return bad
    return code, encoding, stored, ndim, n0, n1, payload, after


@njit(cache=True, nogil=True)
def read_ints(buf, header, out):
    """Fill ``out`` (flat, of the array's size) with an integer array stored by cast; False when it is not
    one."""
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
        values = buf[payload : payload + n * ITEMSIZE[code]].view(out.dtype)
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
    table = buf[payload + 4 : payload + 4 + count * ITEMSIZE[code]].view(out.dtype)
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
    """Where the element indices of a ranked array (encoding 2, ``header`` from :func:`array_header`)
    start."""
    payload = header[6]
    return payload + 5 + unsigned_at(buf, payload, 4) * (2 + ITEMSIZE[buf[payload + 4]])


@njit(cache=True, nogil=True)
def record_header(buf, start, end):
    """``(ok, flags, action, reward, discount, policy_version, body)`` of the record in ``buf[start:end]``
    (not ok for another magic or format version)."""
    if end - start < HEADER_SIZE or buf[start + 4] != VERSION:
        return False, 0, 0, 0.0, 0.0, 0, 0
    for j in range(4):
        if buf[start + j] != _MAGIC[j]:
            return False, 0, 0, 0.0, 0.0, 0, 0
    flags = buf[start + 5]
    action = int_at(buf, start + 6, 4)
    reward = buf[start + 14 : start + 22].view(np.float64)[0]
    discount = buf[start + 22 : start + 30].view(np.float64)[0]
    version = int_at(buf, start + 30, 4)
    return True, flags, action, reward, discount, version, start + HEADER_SIZE


@njit(cache=True, nogil=True)
def observation_record_header(buf, start, end):
    """``(ok, body)`` of the observation record in ``buf[start:end]``."""
    if end - start < 5 or buf[start + 4] != VERSION:
        return False, 0
    for j in range(4):
        if buf[start + j] != _OBSERVATION_MAGIC[j]:
            return False, 0
    return True, start + 5


@njit(cache=True, nogil=True)
def observation_header(buf, pos, end, arrays):
    """Locate the state at ``pos``: ``(ok, form, n_leaves, radius, flags, next)`` and
    the positions of its array headers in ``arrays`` (neighbors, edges, lengths, then for the rich
    form deltas, parsimony length and support). Not ok for another form or stored node features."""
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


@njit(cache=True, nogil=True)
def tree_tables(neighbors, edges, n_leaves):
    """``(node_edges, error)``: error 0 when the arrays form an unrooted binary tree (else 1: the counts do
    not fit, 2: a malformed neighbour row, 3: the edges do not match the neighbours, 4: not connected)."""
    n_nodes = neighbors.shape[0]
    return tree_tables_into(
        neighbors,
        edges,
        n_leaves,
        np.empty((n_nodes, 3), np.int32),
        np.empty(n_nodes, np.bool_),
        np.empty(n_nodes, np.int64),
    )


@njit(cache=True, nogil=True)
def tree_tables_into(neighbors, edges, n_leaves, node_edges, seen, stack):
    """:func:`tree_tables` into given arrays (int32 ``[N, 3]``, bool and int64 ``[N]`` scratch), such as a
    batch decoder's, made once for many trees."""
    n_nodes = neighbors.shape[0]
    node_edges[:] = -1
    if n_leaves < 3 or n_nodes != 2 * n_leaves - 2 or edges.shape[0] != n_nodes - 1:
        return node_edges, 1
    for v in range(n_nodes):
        want = 1 if v < n_leaves else 3
        for k in range(3):
            u = neighbors[v, k]
            if k < want:
                if u < 0 or u >= n_nodes or u == v:
                    return node_edges, 2
            elif u != -1:
                return node_edges, 2
    for e in range(n_nodes - 1):
        u, v = edges[e, 0], edges[e, 1]
        if u < 0 or u >= n_nodes or v < 0 or v >= n_nodes:
            return node_edges, 3
        ku, kv = slot_of(neighbors, u, v), slot_of(neighbors, v, u)
        if ku < 0 or kv < 0 or node_edges[u, ku] >= 0 or node_edges[v, kv] >= 0:
            return node_edges, 3
        node_edges[u, ku] = e
        node_edges[v, kv] = e
    # Every slot now holds exactly one edge; with N-1 edges the graph is a tree iff connected.
    seen[:] = False
    stack[0] = 0
    seen[0] = True
    top, count = 1, 1
    while top > 0:
        top -= 1
        v = stack[top]
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and not seen[u]:
                seen[u] = True
                stack[top] = u
                top += 1
                count += 1
    if count != n_nodes:
        return node_edges, 4
    return node_edges, 0
