"""gRPC face of the replay table: ``phylorl.v1.ReplayService`` plus the standard health service."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

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
T = TypeVar("T")


class ReplayServicer(replay_pb2_grpc.ReplayServiceServicer):
    """Translates messages to :class:`PrioritizedReplay` calls and its errors to status codes.

    ``INVALID_ARGUMENT`` bad request (an inserted record that is not a valid transition is named:
    :func:`~phylorl.records.decode.check_records`); ``DEADLINE_EXCEEDED`` the rate limiter did not admit the
    call in time; ``RESOURCE_EXHAUSTED`` too many calls already wait; ``FAILED_PRECONDITION`` every priority
    is 0; ``UNAVAILABLE`` starting, shutting down, or Redis unreachable.
    """

    def __init__(self, default_timeout_s: float):
        self._table: PrioritizedReplay | None = None
        self._default_timeout_s = default_timeout_s

    def attach(self, table: PrioritizedReplay) -> None:
        """Start answering with ``table`` (until then every call is ``UNAVAILABLE``)."""
        self._table = table

    def Insert(
        self, request: replay_pb2.InsertRequest, context: grpc.ServicerContext
    ) -> replay_pb2.InsertResponse:
        start = time.perf_counter()

        def insert() -> replay_pb2.InsertResponse:
            if not request.HasField("packed"):
                raise ValueError("InsertRequest carries no transitions (set `packed`)")
            if request.first_sequence < 0:
                raise ValueError(f"first_sequence must be >= 0, got {request.first_sequence}")
            records = codec.unpack_records(request.packed)
            check_records(records)
            priorities = (
                codec.ndarray_from_proto(request.priorities) if request.HasField("priorities") else None
            )
            result = self._ready().insert(
                records,
                priorities,
                self._timeout(request.timeout_ms, context),
                request.producer,
                request.first_sequence,
            )
            metrics.RATE_LIMITED_SECONDS.labels("insert").inc(result.waited_s)
            metrics.INSERTED.inc(len(result.keys))
            metrics.DUPLICATES.inc(result.duplicates)
            metrics.SIZE.set(result.size)
            return replay_pb2.InsertResponse(
                keys=codec.ndarray_to_proto(result.keys), size=result.size, duplicates=result.duplicates
            )

        response = _answer(context, "insert", insert)
        metrics.INSERT_SECONDS.observe(time.perf_counter() - start)
        return response

    def Sample(
        self, request: replay_pb2.SampleRequest, context: grpc.ServicerContext
    ) -> replay_pb2.SampleResponse:
        start = time.perf_counter()

        def sample() -> replay_pb2.SampleResponse:
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

        response = _answer(context, "sample", sample)
        metrics.SAMPLE_SECONDS.observe(time.perf_counter() - start)
        return response

    def UpdatePriorities(
        self, request: replay_pb2.UpdatePrioritiesRequest, context: grpc.ServicerContext
    ) -> replay_pb2.UpdatePrioritiesResponse:
        def update() -> replay_pb2.UpdatePrioritiesResponse:
            keys = codec.ndarray_from_proto(request.keys)
            if keys.dtype.kind not in "iu":
                raise ValueError(f"keys must be integers, got dtype {keys.dtype}")
            updated = self._ready().update_priorities(keys, codec.ndarray_from_proto(request.priorities))
            metrics.PRIORITY_UPDATES.inc(updated)
            return replay_pb2.UpdatePrioritiesResponse(updated=updated)

        return _answer(context, "update_priorities", update)

    def Stats(
        self, request: replay_pb2.StatsRequest, context: grpc.ServicerContext
    ) -> replay_pb2.StatsResponse:
        def stats() -> replay_pb2.StatsResponse:
            table = self._ready()
            s = table.stats()
            limiter = table.rate_limiter
            return replay_pb2.StatsResponse(
                size=s.size,
                capacity=s.capacity,
                inserted_total=s.inserted_total,
                sampled_total=s.sampled_total,
                evicted_total=s.evicted_total,
                next_key=s.next_key,
                total_priority=s.total_priority,
                max_priority=s.max_priority,
                alpha=table.alpha,
                beta=table.beta,
                min_size_to_sample=limiter.min_size_to_sample,
                samples_per_insert=limiter.samples_per_insert,
                rate_limiter_diff=s.rate_limiter_diff,
                waiting_inserts=s.waiting_inserts,
                waiting_samples=s.waiting_samples,
            )

        return _answer(context, "stats", stats)

    def _ready(self) -> PrioritizedReplay:
        if self._table is None:
            raise ReplayClosed("the replay service is still rebuilding its index from Redis")
        return self._table

    def _timeout(self, timeout_ms: int, context: grpc.ServicerContext) -> float:
        if timeout_ms < 0:
            raise ValueError(f"timeout_ms must be >= 0, got {timeout_ms}")
        timeout_s = timeout_ms / 1000 if timeout_ms else self._default_timeout_s
        remaining = context.time_remaining()
        if remaining is not None:
            timeout_s = min(timeout_s, max(0.0, remaining - _DEADLINE_MARGIN_S))
        return timeout_s


class ReplayServer:
    """A gRPC server with ReplayService and health, bound to ``host:port`` (``port=0``: any free port)."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        max_workers: int,
        max_message_bytes: int,
        default_timeout_s: float,
        security=None,
    ):
        """``security``: a config with TLS and token fields (:mod:`services.common.security`); None:
        plaintext."""
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
        self._table: PrioritizedReplay | None = None

    def start(self) -> None:
        """Accept connections; health stays NOT_SERVING until :meth:`serve`."""
        self._server.start()

    def serve(self, table: PrioritizedReplay) -> None:
        """Answer calls with ``table`` and report SERVING."""
        self._table = table
        self.servicer.attach(table)
        self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace_s: float) -> None:
        """Drain: report NOT_SERVING, refuse new calls, let running ones finish (at most ``grace_s``).

        Calls waiting for the rate limiter cannot finish without further traffic, so they are woken
        and answered UNAVAILABLE at once.
        """
        self.health.enter_graceful_shutdown()
        done = self._server.stop(grace_s)
        if self._table is not None:
            self._table.close()
        done.wait()

    def _set_health(self, status: int) -> None:
        for name in ("", SERVICE_NAME):
            self.health.set(name, status)


def _answer(context: grpc.ServicerContext, call: str, handler: Callable[[], T]) -> T:
    """Run ``handler``; turn the table's exceptions into gRPC statuses with their message."""
    try:
        return handler()
    except ValueError as e:
        code, message = grpc.StatusCode.INVALID_ARGUMENT, str(e)
    except TooManyWaiting as e:
        code, message = grpc.StatusCode.RESOURCE_EXHAUSTED, str(e)
    except RateLimited as e:
        code, message = grpc.StatusCode.DEADLINE_EXCEEDED, str(e)
    except NothingToSample as e:
        code, message = grpc.StatusCode.FAILED_PRECONDITION, str(e)
    except ReplayClosed as e:
        code, message = grpc.StatusCode.UNAVAILABLE, str(e)
    except redis.RedisError as e:
        code, message = grpc.StatusCode.UNAVAILABLE, f"Redis error: {e}"
    metrics.REJECTED.labels(call, code.name).inc()
    context.abort(code, message)
    raise AssertionError("unreachable: context.abort raises")
