"""Start-up shared by the service entry points: logging, the logged config, signals, metrics."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from prometheus_client import start_http_server

from .config import config_json


def startup(prog: str, step, *args):
    """``step(*args)`` of a service's start-up (reading its config, its corpus): bad input (``ValueError``,
    ``OSError``) becomes one line on stderr naming what is wrong, and exit status 2, not a traceback."""
    try:
        return step(*args)
    except (ValueError, OSError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def start_service(config, log: logging.Logger) -> threading.Event:
    """Configure logging, log ``config`` as JSON, serve /metrics on ``config.metrics_port`` (0: off)
    and return an event that SIGTERM or SIGINT sets."""
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    log.info("config %s", config_json(config))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    if config.metrics_port:
        start_http_server(config.metrics_port)
        log.info("metrics on :%d/metrics", config.metrics_port)
    return stop


def wait_for_redis(ping, url: str, wait_s: float, stop: threading.Event, log: logging.Logger) -> bool:
    """Call ``ping()`` (a Redis PING) once a second until it answers; ``False`` when ``stop`` is set first.

    Raises ``redis.ConnectionError`` naming ``url`` after ``wait_s`` seconds without an answer (in a swarm or
    compose stack, a service may start before Redis's name resolves).
    """
    import time

    import redis

    deadline = time.monotonic() + wait_s
    while True:
        try:
            ping()
            return True
        except redis.ConnectionError as e:
            if time.monotonic() > deadline:
                raise redis.ConnectionError(f"{url} did not answer within {wait_s:g} s: {e}") from None
            log.info("waiting for Redis at %s: %s", url, e)
            if stop.wait(1.0):
                return False
