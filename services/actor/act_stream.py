"""How one pipeline group's requests reach the inference endpoint: as the messages of one open ``ActStream``
call, which costs the endpoint's gRPC machinery a fraction of what unary calls would. The endpoint answers a
stream's messages in order; a group has at most one request out. A failed request ends the stream and the next
one opens a new stream, so the actor retries it as it would a failed call."""

from __future__ import annotations

import queue
import threading
import time

import grpc

from phylorl.wire.v1 import inference_pb2

from . import metrics

_CLOSE = object()


class ActStream:
    """One open ``ActStream`` call of ``stub`` (an ``InferenceServiceStub``) at a time, one request out at a
    time. The answers are read by the thread that waits for them (a reader thread would cost a wake-up per
    message). gRPC's blocking read has no timeout, so a watchdog thread looks at the request out every
    ``timeout_s / 4`` (at least every second) and cancels it when overdue: the wait ends DEADLINE_EXCEEDED."""

    def __init__(self, stub, timeout_s: float):
        self._stub = stub
        self._timeout_s = timeout_s
        self._call = None
        self._requests: queue.SimpleQueue | None = None
        self._deadline: float | None = None  # of the request out (monotonic), while there is one
        self._expired = None  # the call the watchdog cancelled for its overdue answer
        self._closed = threading.Event()
        self._lock = threading.Lock()  # the call and its deadline, between the caller and the watchdog
        self._watchdog: threading.Thread | None = None
        self._sent_at = 0.0  # when the request out was sent (perf_counter)

    def send(self, request: inference_pb2.ActRequest) -> None:
        """Queue ``request`` as the stream's next message (opening the stream first if none is open)."""
        if self._call is None:
            self._open()
        self._sent_at = time.perf_counter()
        with self._lock:
            self._deadline = time.monotonic() + self._timeout_s
        self._requests.put(request)

    def receive(self) -> inference_pb2.ActResponse:
        """The answer to the request out; ``grpc.RpcError`` when the stream failed (it is then closed)."""
        call = self._call
        try:
            answer = next(call)
            # (gRPC reads a stream's answer when asked: the time to here, not to its arrival)
            metrics.INFERENCE_CALL_SECONDS.observe(time.perf_counter() - self._sent_at)
            return answer
        except StopIteration:
            error = StreamError(grpc.StatusCode.UNAVAILABLE, "the endpoint closed the stream")
        except grpc.RpcError as failed:
            error = (
                StreamError(grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer within {self._timeout_s} s")
                if self._expired is call
                else failed
            )
        finally:
            with self._lock:
                self._deadline = None
        self.cancel()
        raise error

    def cancel(self) -> None:
        """End the stream (a request out is not answered); the next :meth:`send` opens a new one."""
        with self._lock:
            call, requests = self._call, self._requests
            self._call = self._requests = self._deadline = None
        if call is not None:
            requests.put(_CLOSE)
            call.cancel()

    def close(self) -> None:
        """:meth:`cancel`, and the watchdog stops."""
        self._closed.set()
        self.cancel()

    def _open(self) -> None:
        requests = queue.SimpleQueue()

        def outgoing():
            while (request := requests.get()) is not _CLOSE:
                yield request

        call = self._stub.ActStream(outgoing())
        with self._lock:
            self._call, self._requests = call, requests
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="act-stream-watchdog", daemon=True)
            self._watchdog.start()

    def _watch(self) -> None:
        every = min(1.0, max(0.01, self._timeout_s / 4))
        while not self._closed.wait(every):
            with self._lock:
                call = (
                    self._call if self._deadline is not None and time.monotonic() > self._deadline else None
                )
                if call is not None:
                    self._expired, self._deadline = call, None
            if call is not None:
                call.cancel()


class StreamError(grpc.RpcError):
    """A stream that ended without a status of its own: overdue, or closed by the server between answers."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details
