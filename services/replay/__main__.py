"""Run the replay service: ``python -m services.replay --redis-url redis://HOST:6379/0 --port 50051``.

Start-up: read the config (flags, ``PHYLORL_REPLAY_*``, file; logged as JSON), open the gRPC port with health
NOT_SERVING, wait for Redis, rebuild the sum tree from it, then report SERVING. SIGTERM or SIGINT drains (no
new calls, running ones finish within ``grace_s``) and exits 0.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import redis

from phylorl.replay.rate_limiter import RateLimiter
from services.common.memory import keep_freed_memory
from services.common.rpc import MAX_MESSAGE_BYTES
from services.common.runtime import connect_redis, start_service
from services.replay import metrics
from services.replay.buffer import PrioritizedReplay
from services.replay.config import PROG, ReplayConfig, load_config
from services.replay.server import ReplayServer
from services.replay.store import RedisStore

log = logging.getLogger("phylorl.replay")


def main(argv: list[str] | None = None) -> int:
    config, stop = start_service(PROG, load_config, argv, log)
    keep_freed_memory()  # every sample and insert is a message of megabytes
    server = ReplayServer(
        host=config.host,
        port=config.port,
        max_workers=config.max_workers,
        max_message_bytes=MAX_MESSAGE_BYTES,
        default_timeout_s=config.default_timeout_s,
        security=config,
    )
    server.start()
    log.info(
        "gRPC listening on %s:%d (health NOT_SERVING until the index is rebuilt)", config.host, server.port
    )

    try:
        table = _open_table(config, stop)
    except (redis.RedisError, RuntimeError) as e:
        log.error("cannot open the replay table: %s", e)
        server.stop(0)
        return 1
    if table is None:  # stopped while waiting for Redis
        server.stop(0)
        return 0
    server.serve(table)
    log.info("serving: %d transitions held, capacity %d", table.stats().size, table.capacity)

    stop.wait()
    log.info("stop requested: draining for up to %g s", config.grace_s)
    started = time.monotonic()
    server.stop(config.grace_s)
    log.info("stopped after draining for %.2f s", time.monotonic() - started)
    return 0


def _open_table(config: ReplayConfig, stop: threading.Event) -> PrioritizedReplay | None:
    """Wait for Redis (up to ``redis_wait_s``), then rebuild the table's index from it."""
    client = connect_redis(config, stop, log)
    if client is None:
        return None
    store = RedisStore(client, config.key_prefix)
    started = time.monotonic()
    log.info("rebuilding the index from %s (prefix %s)", config.redis_url, config.key_prefix)
    table = PrioritizedReplay(
        store,
        capacity=config.capacity,
        alpha=config.alpha,
        beta=config.beta,
        rate_limiter=RateLimiter(config.min_size_to_sample, config.samples_per_insert, config.error_buffer),
        seed=None if config.seed < 0 else config.seed,
        max_waiting=(config.max_workers - 1) // 2,
    )
    metrics.SIZE.set(table.stats().size)
    log.info("index rebuilt in %.2f s", time.monotonic() - started)
    return table


if __name__ == "__main__":
    sys.exit(main())
