"""The Triton kernel of :mod:`phylorl.nets.fused_head` (imported only where Triton is installed).

``twin_head`` is left undecorated: :func:`phylorl.nets.fused_head._kernel` compiles it with ``triton.jit``
for a GPU or wraps it in Triton's interpreter for the CPU (tests).
"""

import triton.language as tl


def twin_head(
    table,
    nodes,
    meta,
    meta_rows,
    w2,
    b2,
    w3,
    b3,
    out,
    n_actions,
    table_rows,
    K: tl.constexpr,
    HH: tl.constexpr,
    BLOCK_A: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    net = tl.program_id(1)
    moves = tl.program_id(0) * BLOCK_A + tl.arange(0, BLOCK_A)
    valid = moves < n_actions
    cols = tl.arange(0, HH)
    base = table + net.to(tl.int64) * table_rows * HH
    z = tl.zeros((BLOCK_A, HH), dtype=tl.float32)
    # the first layer: the move's four node rows (role r of node v: row 4 v + r) ...
    for r in tl.static_range(4):
        row = tl.load(nodes + moves * 4 + r, mask=valid, other=0).to(tl.int64) * 4 + r
        z += tl.load(base + row[:, None] * HH + cols[None, :], mask=valid[:, None], other=0.0)
    for k in tl.static_range(K):  # ... and its metadata times the metadata rows
        value = tl.load(meta + moves * K + k, mask=valid, other=0.0)
        z += value[:, None] * tl.load(meta_rows + (net * K + k) * HH + cols)[None, :]
    z = tl.maximum(z, 0.0)
    q = tl.zeros((BLOCK_A,), dtype=tl.float32)
    for n0 in tl.static_range(0, HH, BLOCK_N):  # the second layer, BLOCK_N columns at a time, and the third
        n = n0 + tl.arange(0, BLOCK_N)
        w = tl.load(w2 + net * HH * HH + cols[:, None] * HH + n[None, :])  # [HH, BLOCK_N] of W2^T
        h = tl.dot(z, w, input_precision=PRECISION) + tl.load(b2 + net * HH + n)[None, :]
        q += tl.sum(tl.maximum(h, 0.0) * tl.load(w3 + net * HH + n)[None, :], axis=1)
    q += tl.load(b3 + net)
    tl.store(out + net * n_actions + moves, q, mask=valid)
