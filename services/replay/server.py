"""gRPC face of the replay table: ``phylorl.v1.ReplayService`` plus the standard health service."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from concurrent import futures

import grpc
import redis
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from phylorl.records.decode import check_records
from phylorl.wire import codec
from phylorl.wire.v1 import replay_pb2, replay_pb2_grpc
from services.common import security as secure
from services.common.rpc import add_servicer, message_options
from services.replay import metrics
from services.replay.buffer import (
    NothingToSample,
    PrioritizedReplay,
    RateLimited,
    ReplayClosed,
    TooManyWaiting,
)

SERVICE_NAME = replay_pb2.DESCRIPTOR.services_by_name["ReplayService"].full_name
_DEADLINE_MARGIN_S = 0.02  # answer this long before the caller's own deadline, with our message
ERROR_STATUS = (
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
    (TooManyWaiting, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (RateLimited, grpc.StatusCode.DEADLINE_EXCEEDED),
    (NothingToSample, grpc.StatusCode.FAILED_PRECONDITION),
    (ReplayClosed, grpc.StatusCode.UNAVAILABLE),
    (redis.RedisError, grpc.StatusCode.UNAVAILABLE),
)
"""How the table's errors reach the caller (the first matching class), with their message."""


def _answered(call: str, seconds=None):
    """A servicer method whose errors of :data:`ERROR_STATUS` become gRPC statuses with their message
    (counted), its time to the histogram ``seconds`` when it answers."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def answer(self, request, context: grpc.ServicerContext):
            start = time.perf_counter()
            try:
                response = method(self, request, context)
            except tuple(kind for kind, _ in ERROR_STATUS) as e:
                code = next(code for kind, code in ERROR_STATUS if isinstance(e, kind))
                message = f"Redis error: {e}" if isinstance(e, redis.RedisError) else str(e)
            else:
                if seconds is not None:
                    seconds.observe(time.perf_counter() - start)
                return response
            metrics.REJECTED.labels(call, code.name).inc()
            context.abort(code, message)
            raise AssertionError("unreachable: context.abort raises")

        return answer

    return wrap


class ReplayServicer(replay_pb2_grpc.ReplayServiceServicer):
    """Translates messages to :class:`PrioritizedReplay` calls and its errors to status codes
    (:data:`ERROR_STATUS`): ``INVALID_ARGUMENT`` a bad request (an inserted record that is not a valid
    transition is named); ``DEADLINE_EXCEEDED`` the rate limiter did not admit the call in time;
    ``RESOURCE_EXHAUSTED`` too many calls already wait; ``FAILED_PRECONDITION`` every priority is 0;
    ``UNAVAILABLE`` starting, shutting down, or Redis unreachable."""

    def __init__(self, default_timeout_s: float):
        self.table: PrioritizedReplay | None = None
        """The table answering the calls (until set, every call is ``UNAVAILABLE``)."""
        self._default_timeout_s = default_timeout_s

    @_answered("insert", metrics.INSERT_SECONDS)
    def Insert(self, request: replay_pb2.InsertRequest, context) -> replay_pb2.InsertResponse:
        if not request.HasField("packed"):
            raise ValueError("InsertRequest carries no transitions (set `packed`)")
        if request.first_sequence < 0:
            raise ValueError(f"first_sequence must be >= 0, got {request.first_sequence}")
        records = codec.unpack_records(request.packed)
        check_records(records)
        priorities = codec.ndarray_from_proto(request.priorities) if request.HasField("priorities") else None
        timeout_s = self._timeout(request.timeout_ms, context)
        result = self._ready().insert(
            records, priorities, timeout_s, request.producer, request.first_sequence
        )
        metrics.RATE_LIMITED_SECONDS.labels("insert").inc(result.waited_s)
        metrics.INSERTED.inc(len(result.keys))
        metrics.DUPLICATES.inc(result.duplicates)
        metrics.SIZE.set(result.size)
        return replay_pb2.InsertResponse(
            keys=codec.ndarray_to_proto(result.keys), size=result.size, duplicates=result.duplicates
        )

    @_answered("sample", metrics.SAMPLE_SECONDS)
    def Sample(self, request: replay_pb2.SampleRequest, context) -> replay_pb2.SampleResponse:
        beta = request.beta if request.HasField("beta") else None
        batch = self._ready().sample(request.batch_size, self._timeout(request.timeout_ms, context), beta)
        metrics.RATE_LIMITED_SECONDS.labels("sample").inc(batch.waited_s)
        metrics.SAMPLED.inc(len(batch.records))
        response = replay_pb2.SampleResponse(size=batch.size)
        codec.ndarray_to_proto(batch.keys, response.keys)
        codec.ndarray_to_proto(batch.weights, response.weights)
        codec.ndarray_to_proto(batch.probabilities, response.probabilities)
        codec.pack_records(batch.records, response.transitions)
        return response

    @_answered("update_priorities")
    def UpdatePriorities(self, request: replay_pb2.UpdatePrioritiesRequest, context):
        keys = codec.ndarray_from_proto(request.keys)
        if keys.dtype.kind not in "iu":
            raise ValueError(f"keys must be integers, got dtype {keys.dtype}")
        updated = self._ready().update_priorities(keys, codec.ndarray_from_proto(request.priorities))
        metrics.PRIORITY_UPDATES.inc(updated)
        return replay_pb2.UpdatePrioritiesResponse(updated=updated)

    @_answered("stats")
    def Stats(self, request: replay_pb2.StatsRequest, context) -> replay_pb2.StatsResponse:
        table = self._ready()
        limiter = table.rate_limiter
        return replay_pb2.StatsResponse(
            **dataclasses.asdict(table.stats()),
            alpha=table.alpha,
            beta=table.beta,
            min_size_to_sample=limiter.min_size_to_sample,
            samples_per_insert=limiter.samples_per_insert,
        )

    def _ready(self) -> PrioritizedReplay:
        if self.table is None:
            raise ReplayClosed("the replay service is still rebuilding its index from Redis")
        return self.table

    def _timeout(self, timeout_ms: int, context: grpc.ServicerContext) -> float:
        if timeout_ms < 0:
            raise ValueError(f"timeout_ms must be >= 0, got {timeout_ms}")
        timeout_s = timeout_ms / 1000 if timeout_ms else self._default_timeout_s
        remaining = context.time_remaining()
        if remaining is not None:
            timeout_s = min(timeout_s, max(0.0, remaining - _DEADLINE_MARGIN_S))
        return timeout_s


class ReplayServer:
    """A gRPC server with ReplayService and health, bound to ``host:port`` (``port=0``: any free port).
    ``security``: a config with TLS and token fields (:mod:`services.common.security`); None: plaintext."""

    def __init__(
        self, *, host: str, port: int, max_workers: int, max_message_bytes, default_timeout_s, security=None
    ):
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="replay-rpc"),
            options=message_options(max_message_bytes),
            interceptors=secure.server_interceptors(security),
        )
        self.servicer = ReplayServicer(default_timeout_s)
        self.health = health.HealthServicer()
        add_servicer(self.servicer, self._server, replay_pb2.DESCRIPTOR.services_by_name["ReplayService"])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.port = secure.add_port(self._server, f"{host}:{port}", security)
        if self.port == 0:
            raise OSError(f"cannot bind the replay gRPC server to {host}:{port}")

    def start(self) -> None:
        """Accept connections; health stays NOT_SERVING until :meth:`serve`."""
        self._server.start()

    def serve(self, table: PrioritizedReplay) -> None:
        """Answer calls with ``table`` and report SERVING."""
        self.servicer.table = table
        self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace_s: float) -> None:
        """Drain: report NOT_SERVING, refuse new calls, let running ones finish (at most ``grace_s``); calls
        waiting for the rate limiter, which need further traffic to finish, are answered UNAVAILABLE at
        once."""
        self.health.enter_graceful_shutdown()
        done = self._server.stop(grace_s)
        if self.servicer.table is not None:
            self.servicer.table.close()
        done.wait()

    def _set_health(self, status: int) -> None:
        for name in ("", SERVICE_NAME):
            self.health.set(name, status)
