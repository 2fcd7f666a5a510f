"""A chain of small torch operations run as one call (TorchScript), for threads that share the interpreter
lock.

Every torch call made from Python lets the interpreter lock go and then takes it back, which waits for the
process's other Python threads (the learner's update loop, inference endpoint and prefetch threads). A
function compiled by TorchScript (deprecated, but the one way to do this for any shapes without compiling per
shape) runs all of its operations in one call; where it cannot compile a function, the function runs as
written, with a warning, and gives the same results.

**A compiled function returns its tensor arguments too.** Dropping the last C++ reference to a tensor that
Python holds takes the interpreter lock; a compiled function drops each argument after its last use, mid-run
(py-spy ``--native``: ``TensorImpl::decref_pyobject`` under ``InterpreterStateImpl::runTemplate``). Returned,
the arguments are let go after the call has taken the lock back: one wait a call instead of one per argument.
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
