"""A compiled hint to the processor: start loading a byte range into the cache now.

A learner's sampled batch is some half a megabyte of records that the record pass reads twice (headers, then
every byte). Read cold, each record's first touches wait on memory one after another; asking for the next
record's lines while the current one is read overlaps those waits with work. :func:`prefetch_range` compiles
to LLVM's ``llvm.prefetch`` (a hint: it never faults and changes no value).
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

LINE = 64
"""Bytes a prefetch brings in (the cache line of x86-64 and most ARM cores)."""


@intrinsic
def _prefetch(typingctx, array, index):
    """Prefetch for reading the cache line of ``array[index]`` (a 1-d array), keeping it in all cache levels."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        byte = ir.IntType(8).as_pointer()
        where = builder.bitcast(builder.gep(ary.data, [args[1]]), byte)
        i32 = ir.IntType(32)
        hint = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(),
                                                                                      [byte, i32, i32, i32]))
        builder.call(hint, [where, i32(0), i32(3), i32(1)])  # read, keep in every level, data cache
        return context.get_dummy_value()

    return types.void(array, index), codegen


@njit(cache=True, nogil=True, inline="always")
def prefetch_range(buf, start, end):
    """Ask for the cache lines of ``buf[start:end]`` (clipped to ``buf``; nothing for an empty range)."""
    end = min(end, buf.shape[0])
    for pos in range(max(start, 0), end, LINE):
        _prefetch(buf, pos)
