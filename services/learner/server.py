"""gRPC wiring of the inference endpoint: ``phylorl.v1.InferenceService`` plus grpc.health.v1."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc

from services.common import security as secure
from services.common.rpc import MAX_MESSAGE_BYTES, message_options

from .config import SERVER_KINDS
from .inference import BatchingInference, Overloaded, Recycled

WEIGHTS_FORMAT = "torch.save/{version,alpha,weights:{q1,q2}}"
MAX_CALLS = 256
"""The endpoint's calls in flight at most by default (open streams included; ``LearnerConfig.inference_max_calls``)."""


ERROR_STATUS = ((Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED), (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
                (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED))
"""How the endpoint's errors reach the caller (the first matching class; anything else is UNKNOWN)."""
ANSWERED_ERRORS = tuple(kind for kind, _ in ERROR_STATUS)


def status_of(error: BaseException) -> grpc.StatusCode | None:
    return next((code for kind, code in ERROR_STATUS if isinstance(error, kind)), None)


def check_request(request) -> None:
    if not request.HasField("states"):
        raise ValueError("an Act request carries its states in `states` (observation records)")


def act_response(actions, q, v, version: int) -> inference_pb2.ActResponse:
    response = inference_pb2.ActResponse(weights_version=version)
    codec.ndarray_to_proto(actions, response.actions)
    codec.ndarray_to_proto(q, response.q)
    codec.ndarray_to_proto(v, response.v)
    return response


def weights_response(inference: BatchingInference, known_version: int) -> inference_pb2.GetWeightsResponse | None:
    """The endpoint's current weights (``None`` before the first publication); only the version when the caller
    has them already."""
    while True:
        snapshot = inference.snapshot
        if snapshot is None:
            return None
        response = inference_pb2.GetWeightsResponse(version=snapshot.version, format=WEIGHTS_FORMAT)
        if known_version == snapshot.version:
            return response
        try:
            response.weights = snapshot.blob
            return response
        except Recycled:  # two publications came meanwhile and reused its networks: the current one's
            continue


STOPPING = "the inference endpoint is stopping"
"""Why an open ``ActStream`` ends UNAVAILABLE when its server stops. A stream never ends by itself (an actor held
by the replay's rate limiter sends nothing), so a stopping server gives its grace to the requests being answered
alone: a stream ends after its answer, and an idle one at once (the threaded server: once no request is being
answered, by a second stop without grace; the asyncio server: its handler woken and ended; two stops crashed
``grpc.aio``). Otherwise the grace would always run out."""


class InFlight:
    """Requests being answered (unary calls, stream messages, weights), counted so that a stopping server waits for
    them and not for idle streams."""

    def __init__(self):
        self._count = 0
        self._idle = threading.Condition()

    def __enter__(self) -> None:
        with self._idle:
            self._count += 1

    def __exit__(self, *exc) -> None:
        with self._idle:
            self._count -= 1
            if self._count == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether no request was being answered within ``timeout_s``."""
        with self._idle:
            return self._idle.wait_for(lambda: self._count == 0, timeout_s)


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    def __init__(self, inference: BatchingInference, timeout_s: float = 60.0):
        self.inference = inference
        self.timeout_s = timeout_s
        self.stopping = threading.Event()
        """Set when the server stops: an open stream ends at its next request (UNAVAILABLE, :data:`STOPPING`)."""
        self.in_flight = InFlight()

    def Act(self, request, context):
        with self.in_flight:
            try:
                check_request(request)
                answer = self.inference.act(codec.unpack_records(request.states), request.greedy, self.timeout_s)
            except ANSWERED_ERRORS as exc:
                context.abort(status_of(exc), str(exc))
            return act_response(*answer)

    def ActStream(self, requests, context):
        """Each request answered as :meth:`Act` answers it, in order, on this call's one pool thread (an open
        stream holds it: see :class:`InferenceServer`'s ``max_workers``)."""
        for request in requests:
            if self.stopping.is_set():
                context.abort(grpc.StatusCode.UNAVAILABLE, STOPPING)
            yield self.Act(request, context)
            if self.stopping.is_set():  # (asked for the next answer once this one is sent: not waiting for a request)
                context.abort(grpc.StatusCode.UNAVAILABLE, STOPPING)

    def GetWeights(self, request, context):
        with self.in_flight:
            response = weights_response(self.inference, request.known_version)
        if response is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no weights published yet")
        return response


class InferenceServer:
    """The gRPC server (a thread per call in flight); health is NOT_SERVING until :meth:`set_serving`."""

    def __init__(self, inference: BatchingInference, host: str, port: int, max_workers: int = MAX_CALLS,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, security=None):
        """``security``: a config with TLS and token fields (:mod:`services.common.security`); None: plaintext.
        ``max_workers``: calls in flight at most, each on a pool thread of its own, an open ``ActStream`` for as
        long as it is open; a call beyond them is refused at once with RESOURCE_EXHAUSTED (which actors retry)
        rather than queued behind streams that may never end."""
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                                  options=message_options(max_message_bytes),
                                  interceptors=secure.server_interceptors(security),
                                  maximum_concurrent_rpcs=max_workers)
        self.servicer = InferenceServicer(inference)
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(self.servicer, self.server)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = secure.add_port(self.server, f"{host}:{port}", security)
        self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)

    def start(self) -> None:
        self.server.start()

    def set_serving(self) -> None:
        self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        self.health.set("phylorl.v1.InferenceService", health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace_s: float) -> None:
        """Refuse new calls, give the requests being answered ``grace_s``, end each open stream at its next request
        and, once no request is being answered, cancel the streams left (:data:`STOPPING`)."""
        self.servicer.stopping.set()
        self.health.enter_graceful_shutdown()
        stopped = self.server.stop(grace_s)
        self.servicer.in_flight.wait_idle(grace_s)
        self.server.stop(0)  # (a later stop with a shorter grace shortens the first)
        stopped.wait()


def make_server(kind: str, inference: BatchingInference, host: str, port: int, *, max_calls: int = MAX_CALLS,
                max_message_bytes: int = MAX_MESSAGE_BYTES, security=None):
    """The endpoint's server of ``kind`` (:data:`~services.learner.config.SERVER_KINDS`: the threaded
    :class:`InferenceServer` or the asyncio :class:`~services.learner.aio_server.AsyncInferenceServer`), serving at
    most ``max_calls`` calls at once (open streams included); both have ``port``, ``start``, ``set_serving`` and
    ``stop``."""
    if kind == "threads":
        return InferenceServer(inference, host, port, max_calls, max_message_bytes, security)
    if kind == "asyncio":
        from .aio_server import AsyncInferenceServer

        return AsyncInferenceServer(inference, host, port, max_message_bytes, security, max_calls)
    raise ValueError(f"inference server must be one of {', '.join(SERVER_KINDS)}, got {kind!r}")
