"""How a record stores one array (:mod:`phylorl.records.format`): each array as a small header, its shape and
its elements, cast to a narrower integer type when every value fits, or (floats of 256 elements or more) as a
dictionary of distinct bit patterns and one ``uint8``/``uint16`` index per element when that is smaller, or
(:func:`encode_ranked`, floats whose values are whole numbers) as a ranked dictionary.

    array    "<BBBB" dtype code, encoding, stored dtype code, ndim; ndim x "<I" shape;
             payload: encoding 0 (cast): the elements in the stored dtype
                      encoding 1 (dictionary): "<I" count, the distinct element bit patterns (count x
                      itemsize), then one index per element encoding 2 (ranked): "<I" count, "<B" the dtype
                      code of the counts (an unsigned type), the distinct values in ascending order as int16
                      (count x 2), how many elements hold each value (count x its itemsize), then one index
                      per element

A ranked array tells its readers each value's rank among the elements without a pass over them (the
parsimony columns of the rich move features are such ranks: :mod:`phylorl.records.features`).
The compiled readers (:mod:`phylorl.records.reader`) give back the original dtype, shape and bit patterns
(``-0.0`` and NaN payloads included).
"""

from __future__ import annotations

import struct

import numpy as np

_ARRAY_HEADER = struct.Struct("<BBBB")
_COUNT = struct.Struct("<I")
_SHAPES = tuple(struct.Struct(f"<{ndim}I") for ndim in range(256))
_CAST, _DICTIONARY, _RANKED = 0, 1, 2
_DICT_MIN_SIZE = 256  # smaller float arrays are stored as they are (a dictionary saves little there)

_INTEGERS = tuple(f"{kind}{bits}" for kind in ("int", "uint") for bits in (8, 16, 32, 64))
# the dtypes a record (and an NDArray on the wire) holds; a record's dtype code is the index here
DTYPE_NAMES = ("bool", *_INTEGERS, "float16", "float32", "float64")
_DTYPES = tuple(np.dtype(name).newbyteorder("<") for name in DTYPE_NAMES)
_CODE = {dt.str: code for code, dt in enumerate(_DTYPES)}
_INT64_AS_BYTES = _ARRAY_HEADER.pack(_CODE["<i8"], _CAST, _CODE["|u1"], 1)  # encode_row's two fast cases
_FLOAT32_AS_IS = _ARRAY_HEADER.pack(_CODE["<f4"], _CAST, _CODE["<f4"], 1)
_BITS = {2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
_UNSIGNED = tuple((np.dtype(n), int(np.iinfo(n).min), int(np.iinfo(n).max)) for n in ("<u1", "<u2", "<u4"))
_SIGNED = tuple((np.dtype(n), int(np.iinfo(n).min), int(np.iinfo(n).max)) for n in ("<i1", "<i2", "<i4"))


def encode_array(value: np.ndarray, name: str, parts: list[bytes]) -> None:
    """Append ``value``'s bytes to ``parts`` (``ValueError`` naming ``name`` when it cannot be stored)."""
    array = np.asarray(value)
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder != "|" else array.dtype
    code = _CODE.get(dtype.str)
    if code is None:
        raise ValueError(f"{name}: dtype {array.dtype} cannot be stored; use bool, (u)int8-64 or float16-64")
    if any(d >= 2**32 for d in array.shape):  # (numpy's ndim is at most 64: "<B" holds it)
        raise ValueError(f"{name}: shape {array.shape} too large for a record")
    array = np.asarray(array, dtype=dtype, order="C")
    if dtype.kind == "f" and array.size >= _DICT_MIN_SIZE:
        bits = array.reshape(-1).view(_BITS[dtype.itemsize])
        table = _distinct(bits)
        index_dtype = np.dtype("<u1") if len(table) <= 256 else np.dtype("<u2")
        stored_size = len(table) * dtype.itemsize + array.size * index_dtype.itemsize
        if len(table) <= 65536 and stored_size < array.nbytes:
            index = np.searchsorted(table, bits).astype(index_dtype)
            parts += [_head(code, _DICTIONARY, index_dtype, array), _COUNT.pack(len(table))]
            parts += [table.tobytes(), index.tobytes()]
            return
    stored = _narrowest_int(array) if dtype.kind in "iu" else dtype
    parts += [_head(code, _CAST, stored, array), array.astype(stored, copy=False).tobytes()]


def encode_ranked(value: np.ndarray, name: str, parts: list[bytes]) -> None:
    """:func:`encode_array` of a float array, ranked (encoding 2) when that holds it exactly: 256 elements or
    more, every value a whole number that int16 holds and none ``-0.0``; otherwise as :func:`encode_array`
    stores it."""
    array = np.asarray(value)
    code = _CODE.get(array.dtype.newbyteorder("<").str) if array.dtype.kind == "f" else None
    if code is None or array.size < _DICT_MIN_SIZE or any(d >= 2**32 for d in array.shape):
        return encode_array(value, name, parts)
    flat = array.reshape(-1)
    lo, hi = flat.min(), flat.max()
    if not -32768 <= lo <= hi <= 32767:  # (NaN fails too)
        return encode_array(value, name, parts)
    whole = flat.astype(np.int32)
    if not np.array_equal(whole, flat) or (np.signbit(flat) & (flat == 0)).any():  # fractions, inf, -0.0
        return encode_array(value, name, parts)
    offset = whole - int(lo)
    tally = np.bincount(offset)  # counted over the range: no sort
    present = np.flatnonzero(tally)
    values, counts = present + int(lo), tally[present]  # at most 65536 (the int16 range)
    rank = np.zeros(len(tally), np.int64)
    rank[present] = np.arange(len(present))
    index = rank[offset]
    index_dtype = np.dtype("<u1") if len(values) <= 256 else np.dtype("<u2")
    count_dtype = next(d for d, _, largest in _UNSIGNED if counts.max() <= largest)
    parts += [_head(code, _RANKED, index_dtype, array), _COUNT.pack(len(values))]
    parts += [bytes([_CODE[count_dtype.str]]), values.astype("<i2").tobytes()]
    parts += [counts.astype(count_dtype).tobytes(), index.astype(index_dtype).tobytes()]


def encode_row(value: np.ndarray, name: str, parts: list[bytes]) -> None:
    """:func:`encode_array` of a short 1-D array (a move's row), the same bytes, without its general machinery
    where it is not needed: node ids of a native int64 array that fit a byte, a native float32 array."""
    if value.ndim == 1 and 0 < value.size < _DICT_MIN_SIZE:
        if value.dtype == _DTYPES[_CODE["<i8"]]:
            ids = value.tolist()
            if all(0 <= i < 256 for i in ids):
                parts += [_INT64_AS_BYTES, _SHAPES[1].pack(len(ids)), bytes(ids)]
                return
        elif value.dtype == _DTYPES[_CODE["<f4"]]:
            parts += [_FLOAT32_AS_IS, _SHAPES[1].pack(value.size), value.tobytes()]
            return
    encode_array(value, name, parts)


def _head(code: int, encoding: int, stored: np.dtype, array: np.ndarray) -> bytes:
    """An array's header and shape: its dtype ``code``, ``encoding`` and ``stored`` element type."""
    shape = _SHAPES[array.ndim].pack(*array.shape)
    return _ARRAY_HEADER.pack(code, encoding, _CODE[stored.str], array.ndim) + shape


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-D array (``np.unique`` without its slower bookkeeping)."""
    ordered = np.sort(values)
    keep = np.empty(ordered.size, dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _narrowest_int(array: np.ndarray) -> np.dtype:
    """Smallest integer dtype holding every value of ``array`` (its own dtype if none is smaller)."""
    if array.size == 0:
        return array.dtype
    lo, hi = int(array.min()), int(array.max())
    for candidate, smallest, largest in _UNSIGNED if lo >= 0 else _SIGNED:
        if candidate.itemsize < array.dtype.itemsize and smallest <= lo and hi <= largest:
            return candidate
    return array.dtype
