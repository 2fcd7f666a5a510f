"""A small Python client of ``phylorl.v1.ReplayService`` for actors, the learner, tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from phylorl.records.codec import encode_transition
from phylorl.records.format import PackedRecords
from phylorl.wire import codec
from phylorl.wire.v1 import replay_pb2, replay_pb2_grpc
from services.common import security as secure
from services.common.rpc import MAX_MESSAGE_BYTES, message_options

_RPC_MARGIN_S = 5.0  # the gRPC deadline exceeds the rate-limiter timeout, so the server's message arrives


@dataclass(frozen=True)
class SampledRecords:
    keys: np.ndarray  # int64 [B]
    weights: np.ndarray  # float32 [B], importance weights, max 1
    probabilities: np.ndarray  # float64 [B]
    records: PackedRecords  # B transition records (phylorl.records)
    size: int  # transitions held when the batch was drawn


class ReplayClient:
    """Blocking client; ``timeout_s`` arguments bound the wait for the rate limiter (None: server default)."""

    def __init__(self, target: str, max_message_bytes: int = MAX_MESSAGE_BYTES, security=None):
        """``security``: a config with ``tls_ca_file``/``token_file`` (:mod:`services.common.security`)."""
        self._channel = secure.channel(target, security, message_options(max_message_bytes))
        self._stub = replay_pb2_grpc.ReplayServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> ReplayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_until_serving(self, timeout_s: float) -> None:
        """Block until the health service says SERVING; ``TimeoutError`` after ``timeout_s``."""
        grpc.channel_ready_future(self._channel).result(timeout=timeout_s)
        request = health_pb2.HealthCheckRequest(service="")
        for response in self._health.Watch(request, timeout=timeout_s):
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                return
        raise TimeoutError("health watch ended before the replay service was SERVING")

    def insert(
        self, transitions, priorities: np.ndarray | None = None, timeout_s: float | None = None
    ) -> np.ndarray:
        """Encode and insert ``transitions``; returns their keys ``[n]``."""
        return self.insert_records([encode_transition(t) for t in transitions], priorities, timeout_s)

    def insert_records(
        self,
        records: Sequence[bytes],
        priorities: np.ndarray | None = None,
        timeout_s: float | None = None,
        producer: str = "",
        first_sequence: int = 0,
    ) -> np.ndarray:
        """Insert already-encoded records; returns the keys of those stored ``[m]`` (with ``producer``,
        records numbered ``first_sequence..`` that the service already holds are skipped: ``m <= n``)."""
        request = replay_pb2.InsertRequest(
            timeout_ms=_ms(timeout_s), producer=producer, first_sequence=first_sequence
        )
        codec.pack_records(records, request.packed)
        if priorities is not None:
            codec.ndarray_to_proto(np.asarray(priorities, dtype=np.float64), request.priorities)
        response = self._stub.Insert(request, timeout=_deadline(timeout_s))
        return codec.ndarray_from_proto(response.keys)

    def sample(
        self, batch_size: int, timeout_s: float | None = None, beta: float | None = None
    ) -> SampledRecords:
        """Draw ``batch_size`` transitions; decode them with :meth:`SampledRecords.transitions`."""
        request = replay_pb2.SampleRequest(batch_size=batch_size, timeout_ms=_ms(timeout_s), beta=beta)
        response = self._stub.Sample(request, timeout=_deadline(timeout_s))
        arrays = map(codec.ndarray_from_proto, (response.keys, response.weights, response.probabilities))
        return SampledRecords(*arrays, codec.unpack_records(response.transitions), response.size)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> int:
        """Set raw priorities of ``keys``; returns how many were still held."""
        request = replay_pb2.UpdatePrioritiesRequest(
            keys=codec.ndarray_to_proto(np.asarray(keys, dtype=np.int64)),
            priorities=codec.ndarray_to_proto(np.asarray(priorities, dtype=np.float64)),
        )
        return self._stub.UpdatePriorities(request).updated

    def stats(self) -> replay_pb2.StatsResponse:
        return self._stub.Stats(replay_pb2.StatsRequest())


def _ms(timeout_s: float | None) -> int:
    return 0 if timeout_s is None else max(1, round(timeout_s * 1000))


def _deadline(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else timeout_s + _RPC_MARGIN_S
