"""Health check for docker compose: exit 0 when a service is healthy, 1 otherwise (reason on stderr).

    python healthcheck.py HOST:PORT              gRPC health (grpc.health.v1, service ""): SERVING
    python healthcheck.py http://HOST:PORT/PATH  HTTP GET answers 200 (Prometheus /-/ready, a /metrics page)

``--timeout-s`` bounds the whole check (default 3 s). A secured gRPC service (TLS and a token, see
services/common/security.py) is checked with ``--ca FILE`` (TLS against that CA) and ``--token-file FILE``.
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
from pathlib import Path


def check_grpc(target: str, timeout_s: float, ca: str = "", token_file: str = "") -> str | None:
    """None when ``target`` reports SERVING, else why not."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca).read_bytes()) if ca else None
    channel = grpc.secure_channel(target, credentials) if ca else grpc.insecure_channel(target)
    metadata = [("authorization", f"Bearer {Path(token_file).read_text().strip()}")] if token_file else []
    with channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s, metadata=metadata
            )
        except grpc.RpcError as e:
            return f"{target}: {e.code().name}: {e.details()}"
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        return f"{target}: {health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)}"
    return None


def check_http(url: str, timeout_s: float, **_) -> str | None:
    """None when ``url`` answers 200, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return None if response.status == 200 else f"{url}: HTTP {response.status}"
    except OSError as e:
        return f"{url}: {e}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("target", help="HOST:PORT (gRPC health) or http://HOST:PORT/PATH")
    parser.add_argument("--timeout-s", type=float, default=3.0)
    parser.add_argument(
        "--ca", default="", help="gRPC over TLS, the server's certificate checked against this CA"
    )
    parser.add_argument("--token-file", default="", help="file of the gRPC token to send")
    args = parser.parse_args(argv)
    check = check_http if args.target.startswith(("http://", "https://")) else check_grpc
    problem = check(args.target, args.timeout_s, ca=args.ca, token_file=args.token_file)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
