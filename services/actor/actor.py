"""The actor loop: K environments in ``pipeline`` groups, one batched inference request per group and step
(the messages of one open ``ActStream`` call, :mod:`services.actor.act_stream`), transitions to replay.

Each step gets back a move, its ``Q(s, a)`` and ``V(s)`` per state;
:class:`~phylorl.agent.collector.Collector` (the in-process run's code) steps the environments and turns
finished episodes into n-step transitions with their initial priorities. Transient failures of the learner or
the replay service are retried with exponential backoff; transitions wait in the
:class:`~services.actor.outbox.Outbox` (a journal on disk and memory) until the replay service has stored
them, numbered so that a resend stores nothing twice. At start an actor with a ``spool_dir`` first sends what
the journals of dead actors there still hold, under their producer names. ``<spool_dir>/ledger.jsonl`` gets
one line per producer when it stops or is recovered: ``{"producer", "produced", "pending", "event"}`` (what a
soak adds up).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from pathlib import Path

import grpc
import numpy as np

from phylorl.agent.collector import Collector
from phylorl.env.vec_env import VecTreeEnv
from phylorl.records.codec import StateSections, encode_observation, encode_transition
from phylorl.types import Transition
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc

from . import metrics
from .act_stream import ActStream
from .config import ActorConfig
from .outbox import Outbox, claim_orphans, read_journal

log = logging.getLogger("phylorl.actor")
RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
}
"""Transient statuses: a service away or restarting, overloaded, rate-limited, or a call to repeat. Anything
else (INVALID_ARGUMENT, INTERNAL, UNKNOWN, ...) is a bug on one side, which retrying forever would turn into
an endless warning loop: the actor stops with the error. CANCELLED too, unless stopping
(:func:`transient`)."""
STOP_GRACE_S = 5.0
"""Once stopped, how long the actor may still spend delivering what waits: sends retried, each bounded by
what is left (the replay's rate limiter holds inserts while the learner samples too little, as it does not
at all once done); what is not stored by then stays in the journal. The launcher allows an actor 30 s."""


def transient(code: grpc.StatusCode, stopping: bool) -> bool:
    """Whether a call that ended with ``code`` is retried. CANCELLED is the actor's own stop when it is
    stopping; otherwise a service shutting down cancelled the call (the learner stopping at its update count
    while a call is in flight), which is transient like UNAVAILABLE."""
    return code in RETRYABLE or (code == grpc.StatusCode.CANCELLED and not stopping)


class Actor:
    """Runs ``config.envs`` environments against an inference stub and a replay client."""

    def __init__(
        self, config: ActorConfig, envs: VecTreeEnv, inference_channel, replay_client, stop: threading.Event
    ):
        self.config = config
        self.envs = envs
        # every live observation's state section, encoded once for its request and its two transition records
        self.sections = StateSections((config.n_step + 2) * len(envs) + 8)
        self.stub = inference_pb2_grpc.InferenceServiceStub(inference_channel)
        self.replay = replay_client
        self.stop = stop
        self._stopped_at: float | None = None  # when the actor first saw ``stop`` set
        self.run_id = uuid.uuid4().hex
        self.actor_id = config.actor_id or f"actor-{self.run_id[:8]}"
        name = f"{self.actor_id}-{self.run_id[:8]}.journal"
        journal = Path(config.spool_dir) / name if config.spool_dir else None
        self.outbox = Outbox(config.buffer_capacity, journal, int(config.spool_max_mb * 2**20), self.run_id)
        self._dropped_counted = self.steps = self.episodes = 0
        self.weights_version = -1

    def _retrying(self, service: str, call):
        delay = 0.05
        while not self.stop.is_set():
            try:
                return call()
            except grpc.RpcError as exc:
                if not transient(exc.code(), self.stop.is_set()):
                    raise
                metrics.RECONNECTS.labels(service).inc()
                failure = (service, exc.code().name, exc.details(), delay)
                log.warning("%s call failed (%s: %s); retrying in %.2f s", *failure)
                self.stop.wait(delay)
                delay = min(2 * delay, self.config.backoff_max_s)
        return None

    def _receive(self, request, calls: ActStream) -> inference_pb2.ActResponse | None:
        """The answer to ``request``, which the group's ``calls`` sent; a transient failure is retried (with
        backoff) by sending it again (on a new stream). ``None`` when stopping first."""
        started = time.perf_counter()
        try:
            return calls.receive()
        except grpc.RpcError as exc:
            if not transient(exc.code(), self.stop.is_set()):
                raise
            metrics.RECONNECTS.labels("inference").inc()
            log.warning("inference call failed (%s: %s); retrying in 0.05 s", exc.code().name, exc.details())
            self.stop.wait(0.05)

            def again():
                calls.send(request)
                return calls.receive()

            return self._retrying("inference", again)
        finally:
            metrics.INFERENCE_WAIT_SECONDS.inc(time.perf_counter() - started)

    def _insert(self, batch, producer: str) -> bool:
        records = [r for r, _, _ in batch]
        priorities = np.array([p for _, p, _ in batch], dtype=np.float64)
        # a resend after a lost answer is safe: the service skips the numbers it already stored
        timeout_s = self.config.rpc_timeout_s
        if self.stop.is_set():
            timeout_s = min(timeout_s, self._stop_left())
        self.replay.insert_records(
            records, priorities, timeout_s=timeout_s, producer=producer, first_sequence=batch[0][2]
        )
        return True

    def _stop_left(self) -> float:
        """Seconds left of :data:`STOP_GRACE_S` since the actor first saw its stop (call once stopped)."""
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        return max(0.0, STOP_GRACE_S - (time.monotonic() - self._stopped_at))

    def _ledger(self, producer: str, produced: int, pending: int, event: str) -> None:
        entry = {"producer": producer, "produced": produced, "pending": pending, "event": event}
        with open(Path(self.config.spool_dir) / "ledger.jsonl", "a") as ledger:
            ledger.write(json.dumps({**entry, "actor": self.actor_id}) + "\n")

    def recover(self) -> int:
        """Send what the journals of dead actors in ``spool_dir`` still hold (under their producer names and
        numbers), then delete them; returns the transitions sent (``0`` also when stopped first)."""
        if not self.config.spool_dir:
            return 0
        sent = 0
        for path, handle in claim_orphans(self.config.spool_dir):
            try:
                found = read_journal(path)
                what = "recovering %s: producer %s numbered %d transitions, %d not confirmed stored"
                log.info(what, path.name, found.producer, found.produced, len(found.pending))
                for i in range(0, len(found.pending), self.config.send_batch):
                    batch = found.pending[i : i + self.config.send_batch]
                    if not self._retrying("replay", lambda: self._insert(batch, found.producer)):
                        return sent  # stopping: the journal stays for the next actor
                    sent += len(batch)
                    metrics.RECOVERED.inc(len(batch))
                self._ledger(found.producer, found.produced, len(found.pending), "recovered")
                path.unlink()
            finally:
                handle.close()
        return sent

    def _flush(self, force: bool = False) -> None:
        """Send waiting transitions in batches of ``send_batch`` (all when ``force``, even while stopping); a
        batch leaves the outbox once the replay service has answered; the first failure ends the attempt."""
        while self.outbox and (
            force or (len(self.outbox) >= self.config.send_batch and not self.stop.is_set())
        ):
            batch = self.outbox.front(self.config.send_batch)
            try:
                self._insert(batch, self.run_id)
                self.outbox.commit(len(batch))
                metrics.TRANSITIONS_SENT.inc(len(batch))
            except grpc.RpcError as exc:
                if not transient(exc.code(), self.stop.is_set()):
                    raise
                metrics.RECONNECTS.labels("replay").inc()
                waiting = (exc.code().name, len(self.outbox), self.outbox.spooled)
                log.warning("replay insert failed (%s); %d transitions wait (%d of them on disk)", *waiting)
                break
        self._outbox_metrics()

    def _enqueue(self, transition: Transition, priority: float) -> None:
        obs, next_obs = self.sections(transition.obs), self.sections(transition.next_obs)
        self.outbox.append(encode_transition(transition, obs, next_obs), priority)
        metrics.TRANSITIONS_PRODUCED.inc()
        self._outbox_metrics()

    def _outbox_metrics(self) -> None:
        metrics.BUFFER_SIZE.set(len(self.outbox.memory))
        metrics.SPOOLED.set(self.outbox.spooled)
        metrics.TRANSITIONS_DROPPED.inc(self.outbox.dropped - self._dropped_counted)
        self._dropped_counted = self.outbox.dropped

    def _answer(self, response: inference_pb2.ActResponse) -> tuple:
        """A collector's answer from an Act response."""
        self.weights_version = int(response.weights_version)
        metrics.WEIGHTS_VERSION.set(self.weights_version)
        arrays = map(codec.ndarray_from_proto, (response.actions, response.q, response.v))
        return (*arrays, self.weights_version)

    def _ask(self, collector: Collector, calls) -> inference_pb2.ActRequest:
        """Send ``collector``'s next request on ``calls``, not waiting (its environments reset first)."""
        first = collector.obs is None
        observations = collector.request()
        if first:
            metrics.ENV_RESET_SECONDS.observe(collector.reset_seconds)
        states = [encode_observation(obs, self.sections(obs)) for obs in observations]
        request = inference_pb2.ActRequest(actor_id=self.actor_id, greedy=self.config.greedy)
        codec.pack_records(states, request.states)
        calls.send(request)
        return request

    def run(self) -> None:
        """Step the environments until stopped (or ``max_steps``), in ``pipeline`` groups: each group's Act
        call is sent as soon as the group has stepped, and the loop goes on to the next group, whose answer
        has usually come back meanwhile."""
        cfg = self.config
        self.recover()
        groups = [
            Collector(part, cfg.gamma, cfg.n_step, cfg.label_fraction, seed=cfg.seed + g)
            for g, part in enumerate(self.envs.split(min(cfg.pipeline, len(self.envs))))
        ]
        calls = [ActStream(self.stub, cfg.rpc_timeout_s) for _ in groups]
        try:
            out = [self._ask(collector, c) for collector, c in zip(groups, calls)]
            self._loop(groups, calls, out)
        finally:  # an error propagates (what waits stays in the outbox and its journal); calls in flight end
            for c in calls:
                c.close()
        self._finish()

    def _loop(self, groups: list[Collector], calls: list, out: list) -> None:
        """``calls``: each group's :class:`~services.actor.act_stream.ActStream`; ``out``: each group's
        request out (None once the group is done)."""
        cfg = self.config
        steps = [0] * len(groups)
        labelled, label_seconds = 0, 0.0
        while not self.stop.is_set() and any(r is not None for r in out):
            for g, collector in enumerate(groups):
                if out[g] is None:
                    continue
                response = self._receive(out[g], calls[g])
                if response is None:
                    return
                stepped = collector.finish(self._answer(response))
                steps[g] += 1
                done = bool(cfg.max_steps) and steps[g] >= cfg.max_steps
                out[g] = None if done or self.stop.is_set() else self._ask(collector, calls[g])
                self.steps = min(steps)
                metrics.ENV_STEP_SECONDS.observe(stepped.step_seconds / stepped.env_steps)
                metrics.ENV_STEPS.inc(stepped.env_steps)
                labelled_now = sum(c.labelled_states for c in groups)
                seconds_now = sum(c.label_seconds for c in groups)
                metrics.LABELLED_STATES.inc(labelled_now - labelled)
                metrics.LABEL_SECONDS.inc(seconds_now - label_seconds)
                labelled, label_seconds = labelled_now, seconds_now
                for info in stepped.episodes:
                    self.episodes += 1
                    metrics.EPISODES.inc()
                    metrics.EPISODE_DELTA_LOGLIK.observe(info["episode_delta_loglik"])
                    metrics.EPISODE_DELTA_CUMULATIVE.inc(info["episode_delta_loglik"])
                    metrics.ENV_RESET_SECONDS.observe(info["reset_seconds"])
                for transition, priority in zip(stepped.transitions, stepped.priorities):
                    self._enqueue(transition, priority)
                self._flush()
                if self.stop.is_set():
                    return

    def _finish(self) -> None:
        """Deliver what was made (everything, unless stopped first), then close the outbox."""
        cfg = self.config
        self._flush(force=True)
        delay = 0.05
        # done stepping (max_steps): deliver what was made; stopped: while STOP_GRACE_S lasts
        while self.outbox and (not self.stop.is_set() or self._stop_left() > 0):
            if self.stop.is_set():
                time.sleep(min(delay, self._stop_left()))
            else:
                self.stop.wait(delay)
            delay = min(2 * delay, cfg.backoff_max_s)
            self._flush(force=True)
        if self.outbox:
            where = " (left in the journal for the next actor)" if cfg.spool_dir else ""
            log.warning(
                "stopping with %d transitions the replay service has not stored%s", len(self.outbox), where
            )
        if cfg.spool_dir:
            self._ledger(self.run_id, self.outbox.next_number, len(self.outbox), "stopped")
        self.outbox.close()
