"""The ceiling the synchronous gRPC server sets on the inference endpoint: ``Act`` (and ``ActStream``) answered at
once with a fixed reply (the request's records unpacked, no inputs made, no network), to N client processes sending
the same 20-taxon requests back to back as ``bench_inference.py``'s do, as unary calls or as the messages of one
open stream each (``--rpc``). Prints one JSON line: per kind of call and N, requests/s, p50/p99 and the server
process's CPU per request (``server_cpu_us_per_request``, the clients' start-up and warm-up included).

    python benchmarks/bench_grpc_ceiling.py [--streams 16,48] [--rpc unary,stream] [--seconds 3]
"""

from __future__ import annotations

import argparse
import time
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

    def ActStream(self, requests, context):
        for request in requests:
            yield self.Act(request, context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="16,48", help="comma-separated numbers of client processes")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rpc", default="unary,stream", help="comma-separated kinds of call: unary, stream")
    args = parser.parse_args()
    reqs = requests(states(8, "rich", seed=0))
    result = {"bench": "grpc_ceiling", "machine": machine(), "seconds_per_setting": args.seconds}
    for rpc in args.rpc.split(","):
        for streams in map(int, args.streams.split(",")):
            # as the endpoint's server: a thread per call in flight (InferenceServer, bench_inference's max_calls)
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=max(16, 2 * streams)))
            inference_pb2_grpc.add_InferenceServiceServicer_to_server(Immediate(), server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            try:
                cpu = time.process_time()
                latencies, seconds = client_processes(port, streams, args.seconds, reqs, rpc)
                cpu = time.process_time() - cpu
                key = f"streams_{streams}" if rpc == "unary" else f"{rpc}_streams_{streams}"
                result[key] = {**summary(latencies, seconds),
                               "server_cpu_us_per_request": round(cpu / max(len(latencies), 1) * 1e6, 1)}
            finally:
                server.stop(1.0)
    emit(result)


if __name__ == "__main__":
    main()
