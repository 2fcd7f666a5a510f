"""gRPC wiring of the inference endpoint: ``phylorl.v1.InferenceService`` plus grpc.health.v1."""

from __future__ import annotations

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
"""The threaded server's calls in flight at most (open streams included; ``LearnerConfig.inference_max_calls``)."""


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


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    def __init__(self, inference: BatchingInference, timeout_s: float = 60.0):
        self.inference = inference
        self.timeout_s = timeout_s

    def Act(self, request, context):
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
            yield self.Act(request, context)

    def GetWeights(self, request, context):
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
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(InferenceServicer(inference), self.server)
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
        self.health.enter_graceful_shutdown()
        self.server.stop(grace_s).wait()


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
