r"""The Q head over every move of a batch, for both twin networks, as one fused Triton kernel.

Without autograd, :class:`~phylorl.nets.twin.TwinQ` evaluates for each network ``t`` and move ``a``

.. math::
    Q_t(a) = w_{3,t}^\top\, \mathrm{relu}\big(W_{2,t}^\top\, \mathrm{relu}(\textstyle\sum_r c_{a,r}\,
    T_t[i_{a,r}]) + b_{2,t}\big) + b_{3,t}

where the first layer is a weighted gather-sum of table rows (the ``embedding_bag`` of :meth:`QNetwork.plan
<phylorl.nets.qnet.QNetwork.plan>`). Unfused that is five kernels, each writing or reading ``[A,
head_hidden]`` float32 activations (147 MB per network at the design size). Here one program takes ``BLOCK_A``
moves of one network: it sums their four node rows (the tree's row is added to the role-0 node rows
beforehand) and ``K`` metadata rows in registers, applies the ReLU, the second layer (``tl.dot`` over
``BLOCK_N`` output columns at a time), its ReLU and the last layer, and writes one float per move.

Precision: the second layer's product uses TF32 when ``torch.backends.cuda.matmul.allow_tf32`` is set, full
float32 otherwise. Tests (``tests/unit/nets/test_fused_head.py`` through Triton's interpreter, ``tests/gpu``)
compare it with the unfused head. Triton is imported when the kernel is first needed (the CPU build of torch
does not ship it); :func:`require` names what is missing.
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK_A = 64
"""Moves per program."""

BLOCK_N = 64
"""Output columns of the second layer per ``tl.dot``."""

NUM_WARPS = 8

_KERNELS: dict[str, object] = {}


def require() -> None:
    """Raise ``RuntimeError`` naming what is missing when the fused head cannot run on a GPU here."""
    try:
        import triton  # noqa: F401
    except ImportError:
        raise RuntimeError(
            "the fused Q head needs Triton (pip install triton; CUDA builds of torch ship it)"
        ) from None
    if not torch.cuda.is_available():
        raise RuntimeError("the fused Q head runs on a CUDA device, and torch sees none")


def _kernel(device: torch.device):
    """The kernel compiled for a CUDA device; on the CPU, Triton's interpreter (for tests: needs
    ``TRITON_INTERPRET=1`` before Triton is first imported)."""
    kind = "cuda" if device.type == "cuda" else "interpret"
    if kind not in _KERNELS:
        import triton
        from triton import knobs

        from phylorl.nets.fused_kernel import twin_head

        if kind == "interpret" and not knobs.runtime.interpret:
            raise RuntimeError(
                "the fused Q head runs on the CPU only under Triton's interpreter "
                "(TRITON_INTERPRET=1 set before triton is imported)"
            )
        # one compiled variant for every batch: the sizes are not specialised on (by default Triton compiles
        # again for a size that is 1 or a multiple of 16, which would stall the first batch of each such size)
        _KERNELS[kind] = triton.jit(twin_head, do_not_specialize=["n_actions", "table_rows"])
    return _KERNELS[kind]


def warm_up(head_hidden: int, action_meta: int, device: torch.device) -> None:
    """Compile the kernel for this width, metadata width and TF32 setting now, so the first real batch does
    not wait."""
    k, hh = action_meta, head_hidden
    zeros = torch.zeros
    fused_twin_head(
        zeros(2, 4, hh, device=device),
        zeros(1, 4, dtype=torch.long, device=device),
        zeros(1, k, device=device),
        zeros(2, k, hh, device=device),
        zeros(2, hh, hh, device=device),
        zeros(2, hh, device=device),
        zeros(2, hh, device=device),
        zeros(2, device=device),
    )


def supported(head_hidden: int) -> bool:
    """Whether the kernel takes this head width (a power of two of at least :data:`BLOCK_N`)."""
    return head_hidden >= BLOCK_N and head_hidden & (head_hidden - 1) == 0


@torch.no_grad()
def fused_twin_head(
    table: Tensor,
    nodes: Tensor,
    meta: Tensor,
    meta_rows: Tensor,
    w2: Tensor,
    b2: Tensor,
    w3: Tensor,
    b3: Tensor,
    tf32: bool | None = None,
) -> Tensor:
    """``Q`` of both networks for every move: ``[2, A]``.

    Shapes: ``table [2, 4 N, H]`` (each network's first-layer row of node ``v`` in role ``r`` at ``4 v + r``,
    its tree's row added to the role-0 rows), ``nodes [A, 4]`` (the move's node ids, int), ``meta [A, K]``,
    ``meta_rows [2, K, H]``, ``w2 [2, H, H]`` (the second layer's weight transposed: ``z @ w2[t]``),
    ``b2 [2, H]``, ``w3 [2, H]``, ``b3 [2]``; float32, one device. ``tf32``: TF32 products (None:
    ``torch.backends.cuda.matmul.allow_tf32`` on a CUDA device, never on the CPU).
    """
    nets, table_rows, hh = table.shape
    n_actions, k = meta.shape
    if nets != 2 or not supported(hh):
        raise ValueError(
            f"fused_twin_head takes two networks with a power-of-two width >= {BLOCK_N}, "
            f"got table {tuple(table.shape)}"
        )
    if (
        nodes.shape != (n_actions, 4)
        or meta_rows.shape != (2, k, hh)
        or w2.shape != (2, hh, hh)
        or b2.shape != (2, hh)
        or w3.shape != (2, hh)
        or b3.shape != (2,)
    ):
        raise ValueError(
            "fused_twin_head: nodes, meta_rows, w2, b2, w3 or b3 do not match the table and meta"
        )
    tensors = [table, meta, meta_rows, w2, b2, w3, b3]
    if any(t.dtype != torch.float32 for t in tensors) or any(
        t.device != table.device for t in [*tensors, nodes]
    ):
        raise ValueError("fused_twin_head takes float32 tensors on one device")
    if tf32 is None:
        tf32 = table.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    out = torch.empty((2, n_actions), dtype=torch.float32, device=table.device)
    if n_actions == 0:
        return out
    grid = ((n_actions + BLOCK_A - 1) // BLOCK_A, 2)
    args = [t.contiguous() for t in (table, nodes, meta, meta_rows, w2, b2, w3, b3)]
    extra = {"num_warps": NUM_WARPS} if table.device.type == "cuda" else {}
    _kernel(table.device)[grid](
        *args,
        out,
        n_actions,
        table_rows,
        K=k,
        HH=hh,
        BLOCK_A=BLOCK_A,
        BLOCK_N=BLOCK_N,
        PRECISION="tf32" if tf32 else "ieee",
        **extra,
    )
    return out
