"""A chain of small torch operations run as one call (TorchScript), for threads that share the interpreter
lock.

Every torch call made from Python lets the interpreter lock go and then takes it back; in a process whose
other threads run Python (the learner's: its update loop, the inference endpoint's threads, the prefetch
threads), taking it back waits for them, up to the switch interval each time. A function compiled by
TorchScript runs all of its operations in one call. ``torch.jit.script`` is deprecated (it warns so), and is
still the one way here to do that for any shapes without compiling per shape; where it cannot compile a
function (a Python it does not support, say) the function runs as written, with a warning, and gives the same
results.

**A compiled function returns its tensor arguments too.** A tensor that Python holds has a Python object, and
torch keeps that object alive while C++ also holds the tensor; when the last C++ reference goes, torch drops
the object's reference, and that takes the interpreter lock. A compiled function runs with the lock let go,
and its interpreter drops each argument after its last use: so it would take the lock back once per tensor
argument, mid-run, each time waiting for the process's busy threads (py-spy ``--native``:
``TensorImpl::decref_pyobject`` under ``InterpreterStateImpl::runTemplate``). Returned, the arguments live to
the end of the call, and are let go after it has taken the lock back: one wait a call instead of one per
argument.
"""

from __future__ import annotations

import warnings

import torch


def one_call(fn):
    """``fn`` compiled by TorchScript, or ``fn`` itself (with a ``RuntimeWarning``) where it cannot be."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(fn)
    except Exception as exc:  # noqa: BLE001  (whatever TorchScript raises: the plain function is the same)
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        warnings.warn(
            f"TorchScript cannot compile {fn.__qualname__} ({type(exc).__name__}: {first_line}); its "
            "torch operations run one call at a time",
            RuntimeWarning,
            stacklevel=2,
        )
        return fn
