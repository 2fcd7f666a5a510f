"""The inference endpoint's gRPC server: ``phylorl.v1.InferenceService`` (``ActStream``) plus grpc.health.v1,
on ``grpc.aio``: one event-loop thread serves every call in flight. A request is a coroutine: it makes its
states' inputs (on the loop thread), queues them with :meth:`BatchingInference.submit` and awaits a future
that the batching thread resolves through the loop (:class:`_Waker`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from types import SimpleNamespace

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.common import security as secure
from services.common.rpc import MAX_MESSAGE_BYTES, message_options

from .inference import BatchingInference, Overloaded

MAX_CALLS = 256
"""The endpoint's calls in flight at most (open streams included): a call beyond them is refused at once with
RESOURCE_EXHAUSTED (which actors retry)."""

ERROR_STATUS = (
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
)
"""How the endpoint's errors reach the caller (the first matching class; anything else is UNKNOWN)."""

STOPPING = "the inference endpoint is stopping"
"""Why an open ``ActStream`` ends UNAVAILABLE when its server stops. A stream never ends by itself (an actor
held by the replay's rate limiter sends nothing), so a stopping server ends a stream after its answer and an
idle one at once: else its grace would always run out."""


class _Waker:
    """Resolves futures of one event loop from the batching thread, a batch's answers in one wake-up: the
    first future handed over schedules a drain on the loop; those that come before it runs join it."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._lock = threading.Lock()
        self._pending: list[asyncio.Future] = []

    def wake(self, future: asyncio.Future) -> None:
        with self._lock:
            self._pending.append(future)
            if len(self._pending) > 1:  # a drain is already scheduled
                return
        try:
            self.loop.call_soon_threadsafe(self._drain)
        # the loop is closed: the server stopped and nobody awaits these answers any more
        except RuntimeError:
            with self._lock:
                self._pending.clear()

    def _drain(self) -> None:
        with self._lock:
            futures, self._pending = self._pending, []
        for future in futures:
            if not future.done():
                future.set_result(None)


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    def __init__(self, inference: BatchingInference, timeout_s: float = 60.0):
        """Made on the server's event loop, whose calls it serves."""
        self.inference = inference
        self.timeout_s = timeout_s
        self._waker = _Waker(asyncio.get_running_loop())
        self.stopping = False
        """Set (on the loop) when the server stops: see :meth:`stop_streams`."""
        # each open stream's task: whether it is answering a request
        self._streams: dict[asyncio.Task, bool] = {}

    async def ActStream(self, requests, context):
        """Each request answered in turn: its states' chosen moves, their values, the weights version."""
        task = asyncio.current_task()
        self._streams[task] = False
        try:
            async for request in requests:
                if self.stopping:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, STOPPING)
                self._streams[task] = True
                try:
                    answer = await self._act(request, context)
                finally:
                    self._streams[task] = False
                yield answer
                if self.stopping:  # (not waiting for a next request)
                    await context.abort(grpc.StatusCode.UNAVAILABLE, STOPPING)
        except asyncio.CancelledError:
            if not self.stopping:  # the caller went away
                raise
            # stop_streams woke it: the call ends with a status (a cancelled handler alone leaves it open)
            await context.abort(grpc.StatusCode.UNAVAILABLE, STOPPING)
        finally:
            self._streams.pop(task, None)

    def stop_streams(self) -> None:
        """The server is stopping (on its loop): a stream answering a request ends after its answer, the
        others at once (their tasks cancelled), so that the grace waits only for answers
        (:data:`STOPPING`)."""
        self.stopping = True
        for task, answering in list(self._streams.items()):
            if not answering:
                task.cancel()

    async def _act(self, request, context):
        answered = self._waker.loop.create_future()
        # the request's ``done``, set by the batching thread: resolves ``answered`` through the loop's waker
        done = SimpleNamespace(set=functools.partial(self._waker.wake, answered))
        try:
            if not request.HasField("states"):
                raise ValueError("an Act request carries its states in `states` (observation records)")
            pending = self.inference.submit(codec.unpack_records(request.states), request.greedy, done)
            try:
                await asyncio.wait_for(answered, self.timeout_s)
            except TimeoutError:
                raise TimeoutError(f"no answer within {self.timeout_s} s") from None
            answer = self.inference.result(pending)
        except tuple(kind for kind, _ in ERROR_STATUS) as exc:
            await context.abort(next(code for kind, code in ERROR_STATUS if isinstance(exc, kind)), str(exc))
        actions, q, v, version = answer
        response = inference_pb2.ActResponse(weights_version=version)
        for array, field in ((actions, response.actions), (q, response.q), (v, response.v)):
            codec.ndarray_to_proto(array, field)
        return response


class InferenceServer:
    """The endpoint's server, its event loop in a thread of its own; health is NOT_SERVING until
    :meth:`set_serving`. ``security``: a config with TLS and token fields (None: plaintext)."""

    def __init__(
        self,
        inference: BatchingInference,
        host: str,
        port: int,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        security=None,
        max_calls: int = MAX_CALLS,
    ):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="inference-aio", daemon=True)
        self._thread.start()
        try:
            self.server, self.servicer, self.health, self.port = self._run(
                self._build(inference, f"{host}:{port}", max_message_bytes, security, max_calls)
            )
        except BaseException:
            self._close_loop()
            raise

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @staticmethod
    async def _build(inference, address: str, max_message_bytes: int, security, max_calls: int):
        server = grpc.aio.server(
            options=message_options(max_message_bytes),
            interceptors=secure.server_interceptors(security, aio=True),
            maximum_concurrent_rpcs=max_calls,
        )
        servicer = InferenceServicer(inference)
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(servicer, server)
        health = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        port = secure.add_port(server, address, security)
        await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        return server, servicer, health, port

    def start(self) -> None:
        self._run(self.server.start())

    def set_serving(self) -> None:
        for service in ("", "phylorl.v1.InferenceService"):
            self._run(self.health.set(service, health_pb2.HealthCheckResponse.SERVING))

    def stop(self, grace_s: float) -> None:
        if not self._loop.is_running():
            return
        self._run(self._stop(grace_s))
        self._close_loop()

    async def _stop(self, grace_s: float) -> None:
        # (one stop: a second, shorter one while the first waited crashed grpc.aio 1.85 with a segmentation
        # fault)
        self.servicer.stop_streams()
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        self._loop.close()
