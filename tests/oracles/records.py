"""The records' reference decoder, in plain Python: a record back into the
:class:`~phylorl.types.Observation` or :class:`~phylorl.types.Transition` it was made from, its moves
enumerated again from the neighbour table, every array and the tree checked (``ValueError`` names what is
wrong). The product never decodes records this way: the compiled pass of :mod:`phylorl.records.collate` writes
the network's inputs straight from their bytes, and tests hold it equal to this decoder."""

from __future__ import annotations

import math
import struct

import numpy as np

from phylorl.phylo.spr import enumerate_moves_kernel
from phylorl.records import format as fmt
from phylorl.records.arrays import _ARRAY_HEADER, _CAST, _COUNT, _DICTIONARY, _DTYPES, _RANKED, _SHAPES
from phylorl.records.codec import taken_row
from phylorl.records.reader import tree_tables
from phylorl.types import Observation, RichParts, Transition


def decode_observation(record: bytes | bytearray | memoryview) -> Observation:
    """The state in an observation record (``ValueError`` naming what is wrong)."""
    buf = memoryview(record)
    if len(buf) < fmt.OBSERVATION_HEADER.size:
        raise ValueError(f"observation record too short: {len(buf)} bytes")
    magic, version = fmt.OBSERVATION_HEADER.unpack_from(buf, 0)
    _check_kind(magic, version, fmt.OBSERVATION_MAGIC, "observation")
    try:
        obs, offset = _decode_state(buf, fmt.OBSERVATION_HEADER.size)
    except (struct.error, IndexError, OverflowError) as e:
        raise ValueError(f"corrupt observation record: {e}") from None
    if offset != len(buf):
        raise ValueError(f"observation record has {len(buf) - offset} trailing bytes")
    return obs


def decode_transition(record: bytes | bytearray | memoryview) -> Transition:
    """The :class:`Transition` in a transition record (``ValueError`` naming what is wrong); arrays are
    fresh."""
    buf = memoryview(record)
    if len(buf) < fmt.HEADER.size:
        raise ValueError(f"transition record too short: {len(buf)} bytes, the header is {fmt.HEADER.size}")
    magic, version, flags, action, reward, discount, policy_version = fmt.HEADER.unpack_from(buf, 0)
    _check_kind(magic, version, fmt.MAGIC, "transition")
    try:
        obs, offset = _decode_state(buf, fmt.HEADER.size)
        next_obs, offset = _decode_state(buf, offset)
        if flags & fmt.TAKEN:
            nodes, offset = decode_array(buf, offset)
            meta, offset = decode_array(buf, offset)
            _check_taken_row(obs, action, nodes, meta)
        labels = None
        if flags & fmt.LABELLED:
            labels, offset = decode_array(buf, offset)
            if labels.dtype != np.float32 or labels.shape != (next_obs.n_actions,):
                raise ValueError(
                    f"corrupt transition record: next_labels {labels.dtype} {labels.shape} do not "
                    f"match the next state's {next_obs.n_actions} moves"
                )
    except (struct.error, IndexError, OverflowError) as e:  # a length or count that runs past the record
        raise ValueError(f"corrupt transition record: {e}") from None
    if offset != len(buf):
        raise ValueError(f"transition record has {len(buf) - offset} trailing bytes")
    terminal, truncated = bool(flags & fmt.TERMINAL), bool(flags & fmt.TRUNCATED)
    return Transition(obs, action, reward, next_obs, terminal, truncated, discount, policy_version, labels)


def _check_taken_row(obs: Observation, action: int, nodes: np.ndarray, meta: np.ndarray) -> None:
    """``ValueError`` unless the stored taken row is ``obs``'s row of move ``action``, bit for bit."""
    if not 0 <= action < obs.n_actions:
        raise ValueError(
            f"corrupt transition record: action {action} is not one of the state's {obs.n_actions} moves"
        )
    want_nodes, want_meta = taken_row(obs, action)
    for name, a, b in (("node ids", nodes, want_nodes), ("features", meta, want_meta)):
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            raise ValueError(
                f"corrupt transition record: the stored taken move's {name} are not those of move "
                f"{action} of its state"
            )


def _check_kind(magic: bytes, version: int, expected: bytes, kind: str) -> None:
    if magic != expected:
        raise ValueError(f"not a phylorl {kind} record: magic {bytes(magic)!r}, expected {expected!r}")
    if version != fmt.VERSION:
        raise ValueError(f"{kind} record format version {version}; this code reads version {fmt.VERSION}")


def _decode_state(buf: memoryview, offset: int) -> tuple[Observation, int]:
    if offset + fmt.FORM.size + fmt.TREE.size > len(buf):
        raise ValueError(f"record truncated at byte {offset}: missing a state")
    (form,) = fmt.FORM.unpack_from(buf, offset)
    if form not in (fmt.TREE_FORM, fmt.RICH_FORM):
        raise ValueError(f"corrupt record: unknown state form {form} at byte {offset}")
    n_leaves, radius, flags = fmt.TREE.unpack_from(buf, offset + fmt.FORM.size)
    offset += fmt.FORM.size + fmt.TREE.size
    if not flags & fmt.LEAF_FEATURES:
        raise ValueError("corrupt record: a state with stored node features")
    arrays = []
    for _ in range(3 if form == fmt.TREE_FORM else 6):
        array, offset = decode_array(buf, offset)
        arrays.append(array)
    neighbors, edges, lengths = arrays[:3]
    wrong = (neighbors.dtype, edges.dtype, lengths.dtype) != (np.int32, np.int32, np.float32)
    if wrong or neighbors.ndim != 2 or edges.ndim != 2 or lengths.shape != (edges.shape[0],):
        raise ValueError("corrupt record: tree arrays of the wrong dtype or shape")
    if tree_tables(np.ascontiguousarray(neighbors), np.ascontiguousarray(edges), n_leaves)[1]:
        raise ValueError("corrupt record: the stored tree is not an unrooted binary tree")
    dedupe = bool(flags & fmt.DEDUPE)
    moves = enumerate_moves_kernel(neighbors, n_leaves, radius, dedupe)
    rich = None
    if form == fmt.RICH_FORM:
        deltas, length, support = arrays[3:]
        wrong = (deltas.dtype, support.dtype, deltas.shape) != (np.float32, np.float32, (moves.shape[0],))
        if wrong or length.shape != (1,) or support.shape != lengths.shape:
            raise ValueError(
                "corrupt record: the rich parts do not fit the tree (one parsimony change per move, "
                "one support per edge)"
            )
        rich = RichParts(deltas, float(length[0]), support)
    return Observation(neighbors, edges, lengths, int(n_leaves), moves, int(radius), dedupe, rich), offset


def decode_array(buf: memoryview, offset: int) -> tuple[np.ndarray, int]:
    """The array at ``buf[offset]`` (fresh, writable) and the offset after it (``ValueError`` when
    corrupt)."""
    if offset + _ARRAY_HEADER.size > len(buf):
        raise ValueError(f"record truncated at byte {offset}: missing an array header")
    code, encoding, stored_code, ndim = _ARRAY_HEADER.unpack_from(buf, offset)
    if code >= len(_DTYPES) or stored_code >= len(_DTYPES) or encoding not in (_CAST, _DICTIONARY, _RANKED):
        raise ValueError(f"corrupt record: bad array header {(code, encoding, stored_code)} at byte {offset}")
    offset += _ARRAY_HEADER.size
    shape = _SHAPES[ndim].unpack_from(buf, offset)
    offset += 4 * ndim
    size = math.prod(shape)
    dtype, stored = _DTYPES[code], _DTYPES[stored_code]
    if encoding == _RANKED:
        return _decode_ranked(buf, offset, dtype, stored, shape)
    if encoding == _DICTIONARY:
        (count,) = _COUNT.unpack_from(buf, offset)
        offset += _COUNT.size
        table, offset = _take(buf, offset, dtype, count)
        index, offset = _take(buf, offset, stored, size)
        try:
            array = table[index]
        except IndexError:
            raise ValueError(f"corrupt record: dictionary index out of range before byte {offset}") from None
    else:
        array, offset = _take(buf, offset, stored, size)
        array = array.astype(dtype)  # astype copies: result is writable
    return array.reshape(shape), offset


def _decode_ranked(buf: memoryview, offset: int, dtype: np.dtype, stored: np.dtype, shape: tuple) -> tuple:
    """A ranked array (encoding 2) whose payload starts at ``buf[offset]``, checked whole: its values
    ascending, each count the elements' (``ValueError`` otherwise)."""
    size = math.prod(shape)
    (count,) = _COUNT.unpack_from(buf, offset)
    count_code = buf[offset + _COUNT.size] if offset + _COUNT.size < len(buf) else len(_DTYPES)
    offset += _COUNT.size + 1
    count_dtype = _DTYPES[count_code] if count_code < len(_DTYPES) else None
    # as the encoder writes them (and the compiled readers read them): uint8 or uint16 indices, counts to
    # uint32
    if (
        dtype.kind != "f"
        or stored.str not in ("|u1", "<u2")
        or count_dtype is None
        or count_dtype.str not in ("|u1", "<u2", "<u4")
    ):
        raise ValueError(
            f"corrupt record: bad ranked array {(dtype, stored, count_dtype)} before byte {offset}"
        )
    values, offset = _take(buf, offset, np.dtype("<i2"), count)
    counts, offset = _take(buf, offset, count_dtype, count)
    index, offset = _take(buf, offset, stored, size)
    tally = np.bincount(index, minlength=count)  # longer when an index is out of range
    if len(tally) != count or (tally != counts).any() or (values[1:] <= values[:-1]).any():
        raise ValueError(
            f"corrupt record: a ranked array's index, counts or values do not hold before byte {offset}"
        )
    return values.astype(dtype)[index].reshape(shape), offset


def _take(buf: memoryview, offset: int, dtype: np.dtype, count: int) -> tuple[np.ndarray, int]:
    """``count`` elements of ``dtype`` at ``buf[offset]`` (a read-only view) and the offset after them."""
    end = offset + count * dtype.itemsize
    if end > len(buf):
        raise ValueError(f"record truncated: needs {end} bytes, has {len(buf)}")
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset), end
