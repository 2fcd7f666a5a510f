"""Start-up shared by the service entry points: logging, the logged config, signals, metrics, Redis."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from prometheus_client import start_http_server

from . import security
from .config import config_json


def startup(prog: str, step, *args):
    """``step(*args)`` of a service's start-up (reading its config, its corpus): bad input (``ValueError``,
    ``OSError``) becomes one line on stderr naming what is wrong, and exit status 2, not a traceback."""
    try:
        return step(*args)
    except (ValueError, OSError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def start_service(prog: str, load, argv: list[str] | None, log: logging.Logger):
    """Read the config (``load(argv, os.environ)``, ``argv`` defaulting to the command line; bad input as
    :func:`startup` reports it), configure logging, log the config as JSON, serve /metrics on
    ``config.metrics_port`` (0: off); returns the config and an event that SIGTERM or SIGINT sets."""
    config = startup(prog, load, sys.argv[1:] if argv is None else argv, os.environ)
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
    return config, stop


def connect_redis(config, stop: threading.Event, log: logging.Logger):
    """A client of ``config.redis_url`` (as ``config``'s Redis user) once Redis answers a PING, tried once a
    second; None when ``stop`` is set first. Raises ``redis.ConnectionError`` naming the URL after
    ``config.redis_wait_s`` seconds without an answer (in a swarm or compose stack, a service may start before
    Redis's name resolves)."""
    import redis

    url, wait_s = config.redis_url, config.redis_wait_s
    client = security.redis_client(url, config)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            client.ping()
            return client
        except redis.ConnectionError as e:
            if time.monotonic() > deadline:
                raise redis.ConnectionError(f"{url} did not answer within {wait_s:g} s: {e}") from None
            log.info("waiting for Redis at %s: %s", url, e)
            if stop.wait(1.0):
                return None
