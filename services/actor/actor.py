"""The actor loop: K environments, one batched inference call per step, transitions to replay.

Each step sends the K current states to the learner's inference endpoint and gets back a move, its
``Q(s, a)`` and ``V(s)`` per state. A transition's initial priority ``|r + γ V(s') − Q(s, a)|``
needs ``V(s')``, which the next call returns: transitions wait one step in ``pending``. When an
episode was truncated, ``s'`` is not the next state acted on (a new episode started), so ``s'``
rides along in the next call as an extra observation whose move is ignored. Terminal transitions
need no ``V(s')``.

Failures of the learner or the replay service are retried with exponential backoff; transitions
wait in a bounded local buffer (oldest dropped, counted) while replay is away.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from dataclasses import dataclass, replace

import grpc
import numpy as np

from phylorl.env import Transition, VecTreeEnv
from phylorl.wire import codec, record
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc

from . import metrics
from .config import ActorConfig

log = logging.getLogger("phylorl.actor")
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INTERNAL,
             grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED}


@dataclass
class Pending:
    """A transition waiting for ``V(s')``; ``extra`` is its slot among the extra observations, or -1."""

    transition: Transition
    q: float
    extra: int = -1


class Actor:
    """Runs ``config.envs`` environments against an inference stub and a replay client."""

    def __init__(self, config: ActorConfig, envs: VecTreeEnv, inference_channel: grpc.Channel, replay_client,
                 stop: threading.Event):
        self.config = config
        self.envs = envs
        self.stub = inference_pb2_grpc.InferenceServiceStub(inference_channel)
        self.replay = replay_client
        self.stop = stop
        self.run_id = uuid.uuid4().hex
        self.actor_id = config.actor_id or f"actor-{self.run_id[:8]}"
        self.outbox: collections.deque[tuple[bytes, float]] = collections.deque()
        self.steps = 0
        self.episodes = 0
        self.weights_version = -1

    # --------------------------------------------------------------- calls
    def _retrying(self, service: str, call):
        delay = 0.05
        while not self.stop.is_set():
            try:
                return call()
            except grpc.RpcError as exc:
                if exc.code() not in RETRYABLE:
                    raise
                metrics.RECONNECTS.labels(service).inc()
                log.warning("%s call failed (%s: %s); retrying in %.2f s", service, exc.code().name,
                            exc.details(), delay)
                self.stop.wait(delay)
                delay = min(2 * delay, self.config.backoff_max_s)
        return None

    def _act(self, observations) -> inference_pb2.ActResponse | None:
        request = inference_pb2.ActRequest(actor_id=self.actor_id, run_id=self.run_id, greedy=self.config.greedy)
        codec.ndarray_to_proto(np.arange(len(observations), dtype=np.int64), request.env_ids)
        for obs in observations:
            codec.observation_to_proto(obs, request.observations.add())

        def call():
            started = time.perf_counter()
            response = self.stub.Act(request, timeout=self.config.rpc_timeout_s)
            metrics.INFERENCE_CALL_SECONDS.observe(time.perf_counter() - started)
            return response

        return self._retrying("inference", call)

    def _flush(self, force: bool = False) -> None:
        """Send buffered transitions in batches of ``send_batch`` (all of them when ``force``)."""
        while self.outbox and (force or len(self.outbox) >= self.config.send_batch) and not self.stop.is_set():
            batch = [self.outbox.popleft() for _ in range(min(self.config.send_batch, len(self.outbox)))]
            records = [r for r, _ in batch]
            priorities = np.array([p for _, p in batch], dtype=np.float64)
            try:
                self.replay.insert_records(records, priorities, timeout_s=self.config.rpc_timeout_s)
                metrics.TRANSITIONS_SENT.inc(len(batch))
            except grpc.RpcError as exc:
                if exc.code() not in RETRYABLE:
                    raise
                self.outbox.extendleft(reversed(batch))
                metrics.RECONNECTS.labels("replay").inc()
                log.warning("replay insert failed (%s); %d transitions wait locally", exc.code().name, len(self.outbox))
                break
        metrics.BUFFER_SIZE.set(len(self.outbox))

    def _enqueue(self, transition: Transition, priority: float) -> None:
        if len(self.outbox) >= self.config.buffer_capacity:
            self.outbox.popleft()
            metrics.TRANSITIONS_DROPPED.inc()
        self.outbox.append((record.encode_transition(transition), float(priority)))

    # ---------------------------------------------------------------- loop
    def run(self) -> None:
        cfg = self.config
        started = time.perf_counter()
        obs = self.envs.reset()
        metrics.ENV_RESET_SECONDS.observe((time.perf_counter() - started) / len(obs))
        pending: list[Pending | None] = [None] * len(obs)
        extras: list = []
        while not self.stop.is_set():
            response = self._act(list(obs) + extras)
            if response is None:
                break
            actions = codec.ndarray_from_proto(response.actions)
            q = codec.ndarray_from_proto(response.q)
            v = codec.ndarray_from_proto(response.v)
            self.weights_version = int(response.weights_version)
            metrics.WEIGHTS_VERSION.set(self.weights_version)
            k = len(obs)
            for i, item in enumerate(pending):
                if item is None:
                    continue
                t = item.transition
                if t.terminal:
                    next_v = 0.0
                else:
                    next_v = float(v[k + item.extra] if item.extra >= 0 else v[i])
                self._enqueue(t, abs(t.reward + t.discount * next_v - item.q))
            t0 = time.perf_counter()
            result = self.envs.step(actions[:k])
            metrics.ENV_STEP_SECONDS.observe((time.perf_counter() - t0) / k)
            metrics.ENV_STEPS.inc(k)
            self.steps += 1
            extras = []
            for i in range(k):
                transition = Transition(obs[i], int(actions[i]), float(result.rewards[i]), result.next_obs[i],
                                        bool(result.terminal[i]), bool(result.truncated[i]), cfg.gamma,
                                        policy_version=self.weights_version)
                item = Pending(transition, float(q[i]))
                if result.truncated[i] and not result.terminal[i]:
                    item = replace(item, extra=len(extras))
                    extras.append(result.next_obs[i])
                if result.terminal[i] or result.truncated[i]:
                    self.episodes += 1
                    metrics.EPISODES.inc()
                    metrics.EPISODE_DELTA_LOGLIK.observe(result.infos[i]["episode_delta_loglik"])
                    metrics.EPISODE_DELTA_CUMULATIVE.inc(result.infos[i]["episode_delta_loglik"])
                    metrics.ENV_RESET_SECONDS.observe(result.infos[i]["reset_seconds"])
                pending[i] = item
            obs = result.obs
            self._flush()
            if cfg.max_steps and self.steps >= cfg.max_steps:
                break
        self._flush(force=True)
