"""One actor stream of ``bench_inference.py`` as its own process (actors are processes: clients sharing the
endpoint's interpreter would contend for its lock and understate what it serves).

    python benchmarks/inference_client.py PORT REQUESTS_FILE INDEX START_AT SECONDS

``REQUESTS_FILE`` holds serialised ``ActRequest`` messages, each after its length (4 bytes, little-endian);
this stream sends request ``INDEX`` (modulo their number) back to back from the wall-clock time ``START_AT``
for ``SECONDS`` after one warm-up request, and prints the latency of each (seconds) as one JSON list. The
requests are the messages of one open ``ActStream``, sent through the actor's own client
(:class:`services.actor.act_stream.ActStream`).
"""

from __future__ import annotations

import json
import sys
import time

import grpc

from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.actor.act_stream import ActStream


def read_requests(path: str) -> list[bytes]:
    data, out, at = open(path, "rb").read(), [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "little")
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def main(argv: list[str]) -> int:
    port, path, index, start_at, seconds = argv[0], argv[1], int(argv[2]), float(argv[3]), float(argv[4])
    payloads = read_requests(path)
    request = inference_pb2.ActRequest.FromString(payloads[index % len(payloads)])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        calls = ActStream(inference_pb2_grpc.InferenceServiceStub(channel), timeout_s=300)
        calls.send(request)  # connect and warm up
        calls.receive()
        while time.time() < start_at:
            time.sleep(0.001)
        stop, latencies = start_at + seconds, []
        while time.time() < stop:
            t0 = time.perf_counter()
            calls.send(request)
            calls.receive()
            latencies.append(time.perf_counter() - t0)
        calls.close()
    print(json.dumps(latencies))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
