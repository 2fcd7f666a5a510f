"""Redis itself restarts (AOF on, same data dir): the replay table comes back unchanged."""

import numpy as np
from helpers import serve_replay

from phylorl.nets.synthetic import random_transition
from phylorl.records.codec import encode_transition
from phylorl.replay.rate_limiter import RateLimiter
from services.replay.buffer import PrioritizedReplay
from services.replay.store import RedisStore


def open_table(server):
    return PrioritizedReplay(
        RedisStore(server.client(), "aof"),
        capacity=8,
        alpha=0.6,
        beta=0.4,
        rate_limiter=RateLimiter(1),
        seed=0,
    )


def test_table_survives_a_redis_restart(redis_factory, tmp_path):
    rng = np.random.default_rng(0)
    data = [encode_transition(random_transition(20, rng)) for _ in range(10)]
    first = redis_factory(tmp_path / "data")
    table = open_table(first)
    table.insert(data[:6], np.arange(1.0, 7.0))
    table.insert(data[6:], np.array([0.5, 0.25, 3.0, 2.0]))  # evicts keys 0, 1
    table.update_priorities(np.array([2, 9]), np.array([11.0, 0.125]))
    keys, priorities = table.priorities()
    first.stop()

    second = redis_factory(tmp_path / "data")
    again = open_table(second)
    keys2, priorities2 = again.priorities()
    np.testing.assert_array_equal(keys2, keys)
    np.testing.assert_array_equal(priorities2, priorities)
    assert again.stats().total_priority == table.stats().total_priority
    batch = again.sample(200)
    assert all(record == data[key] for key, record in zip(batch.keys, batch.records))


def test_redis_killed_with_signal_9_mid_inserts_keeps_every_acknowledged_insert(redis_factory, tmp_path):
    """kill -9 of Redis (appendfsync always, as every stack runs it) while a producer inserts through the real
    gRPC service: calls fail UNAVAILABLE and are resent; Redis restarts on its AOF; in the end Redis holds
    every acknowledged number of the producer exactly once, and the service's own view agrees."""
    import threading
    import time

    import grpc
    from replay_audit import read_table

    from services.replay.client import ReplayClient

    args = ("--appendfsync", "always")
    first = redis_factory(tmp_path / "data", extra_args=args)
    client = first.client()
    table, server = serve_replay(client, "kill", capacity=100_000, limiter=RateLimiter(1), seed=0)
    records = [encode_transition(random_transition(8, np.random.default_rng(i))) for i in range(8)]
    acknowledged, failures, stop = [], [], threading.Event()

    def produce():
        with ReplayClient(f"127.0.0.1:{server.port}") as replay:
            number = 0
            while not stop.is_set():
                try:
                    replay.insert_records(
                        records, np.ones(8), timeout_s=2.0, producer="p", first_sequence=number
                    )
                    acknowledged.extend(range(number, number + 8))
                    number += 8
                except grpc.RpcError as e:
                    failures.append(e.code())
                    time.sleep(0.05)  # the same batch again, as an actor resends

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        deadline = time.monotonic() + 60
        while len(acknowledged) < 400:
            assert time.monotonic() < deadline and producer.is_alive()
            time.sleep(0.01)
        first.process.kill()  # signal 9: no shutdown, no final fsync
        first.process.wait()
        while not failures:  # the producer notices: its inserts fail and are resent
            assert time.monotonic() < deadline and producer.is_alive()
            time.sleep(0.01)
        redis_factory(tmp_path / "data", first.port, extra_args=args)
        resumed = len(acknowledged)
        while len(acknowledged) < resumed + 400:  # and goes on once Redis is back
            assert time.monotonic() < deadline + 60 and producer.is_alive()
            time.sleep(0.01)
    finally:
        stop.set()
        producer.join(30)
        server.stop(grace_s=1.0)
    assert set(failures) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
    assert acknowledged == list(range(len(acknowledged)))
    held = read_table(client, "kill")
    assert held.duplicates() == 0 and sorted(n for _, n in held.origins) == acknowledged
    assert table.stats().size == len(held.records) == len(acknowledged)
