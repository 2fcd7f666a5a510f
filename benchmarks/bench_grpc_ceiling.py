"""The ceiling the synchronous gRPC server sets on the inference endpoint: ``Act`` answered at once with a fixed
reply (the request's records unpacked, no inputs made, no network), to N client processes sending the same
20-taxon requests back to back as ``bench_inference.py``'s do. Prints one JSON line: requests/s and p50/p99 per N.

    python benchmarks/bench_grpc_ceiling.py [--streams 16,48] [--seconds 3]
"""

from __future__ import annotations

import argparse
from concurrent import futures

import grpc
import numpy as np

from bench_inference import client_processes, requests, states, summary
from common import emit, machine
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc


class Immediate(inference_pb2_grpc.InferenceServiceServicer):
    """Answers every request with one fixed move (the endpoint's servicer minus the inference)."""

    def Act(self, request, context):
        codec.unpack_records(request.states)
        response = inference_pb2.ActResponse(weights_version=1)
        codec.ndarray_to_proto(np.zeros(1, np.int64), response.actions)
        codec.ndarray_to_proto(np.zeros(1, np.float32), response.q)
        codec.ndarray_to_proto(np.zeros(1, np.float32), response.v)
        return response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="16,48", help="comma-separated numbers of client processes")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    reqs = requests(states(8, "rich", seed=0))
    result = {"bench": "grpc_ceiling", "machine": machine(), "seconds_per_setting": args.seconds}
    for streams in map(int, args.streams.split(",")):
        # as the endpoint's server: a thread per waiting request (InferenceServer, bench_inference's max_workers)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=max(16, 2 * streams)))
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(Immediate(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            result[f"streams_{streams}"] = summary(*client_processes(port, streams, args.seconds, reqs))
        finally:
            server.stop(1.0)
    emit(result)


if __name__ == "__main__":
    main()
