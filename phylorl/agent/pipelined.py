"""``AgentConfig.pipelined_updates``: a :class:`~phylorl.agent.learner.Learner`'s updates launched without waiting for
them (:meth:`PipelinedUpdates.launch`), each one's results read at the next launch.

The learner service's loop used to wait on each update's one device sync (its metrics, its priorities and whether it
was finite) before applying it, so the GPU sat idle while the loop sent priorities, took the next batch and published.
Launched, an update is applied on the device unless it is not finite: the fused optimisers skip their step on the
learner's ``_skip`` flag (their ``found_inf``, as AMP's grad scaler uses it) and the target update is gated by it,
so nothing waits for the host to decide.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from typing import TYPE_CHECKING

import numpy as np
import torch

from phylorl.agent.update_results import split, to_host

if TYPE_CHECKING:
    from phylorl.agent.batch import Batch


class PipelinedUpdates:
    """:class:`~phylorl.agent.learner.Learner`'s ``launch`` and ``finish`` (a mixin: they use its update's parts)."""

    def launch(self, batch: Batch, tag=None) -> tuple[dict[str, float], np.ndarray | None, object] | None:
        """``AgentConfig.pipelined_updates``: start an update on ``batch`` without waiting for it, and return the
        previous launch's ``(metrics, priorities, tag)`` (as :meth:`step` returns them, plus the ``tag`` it was
        launched with: the caller's way to know whose they are), or ``None`` for the first. The GPU thus runs
        one update while the caller reads the one before, sends its priorities and fetches the next batch.

        The update is applied on the device unless it is not finite (the optimisers' ``found_inf``, the targets'
        update gated), so nothing waits for the host to decide. ``updates`` and ``weights_version`` count it when
        it is launched; when it turns out not finite, ``updates`` and ``skipped`` say so on its return, and its
        version stays taken if another was launched since (versions never go back): its weights are its
        predecessor's."""
        if self._skip is None:
            raise RuntimeError("Learner.launch needs AgentConfig.pipelined_updates")
        batch, captured = self._prepared(batch)
        with self.graphs.eager() if self.graphs is not None and captured is None else nullcontext():
            values, priorities = self._computed(batch, captured)
            self._applied(captured)
            cuda = values.device.type == "cuda"
            both = to_host(values, priorities, non_blocking=cuda)  # one call; on a GPU copied while the caller
            ready = None  # goes on, read after its event
            if cuda:
                ready = torch.cuda.Event()
                ready.record()
        previous, self._in_flight = self._in_flight, _InFlight(both, values.shape[0], ready, tag,
                                                              self.weights_version)
        return self._finished(previous) if previous is not None else None

    def finish(self) -> tuple[dict[str, float], np.ndarray | None, object] | None:
        """The update in flight's ``(metrics, priorities, tag)``, waiting for it (``None`` when none is)."""
        previous, self._in_flight = self._in_flight, None
        return self._finished(previous) if previous is not None else None

    def _finished(self, done: "_InFlight"):
        if done.ready is not None:
            done.ready.synchronize()
        host, priorities = split(done.both, done.n_values)
        if not host[-1]:  # skipped on the device
            self.skipped += 1
            self.updates -= 1
            if self.weights_version == done.version:  # none launched since: the version is given back
                self.weights_version -= 1
            return self._metrics(None), None, done.tag
        return self._metrics(host), priorities, done.tag


@dataclasses.dataclass
class _InFlight:
    """A launched update's metrics and priorities on their way to the host (see :meth:`Learner.launch`)."""

    both: torch.Tensor
    n_values: int
    ready: "torch.cuda.Event | None"
    tag: object
    version: int

