"""Redis itself restarts (AOF on, same data dir): the replay table comes back unchanged."""

import numpy as np

from phylorl.wire.record import encode_transition
from phylorl.wire.synthetic import random_transition
from services.replay.buffer import PrioritizedReplay
from services.replay.rate_limiter import RateLimiter
from services.replay.store import RedisStore


def open_table(server):
    return PrioritizedReplay(RedisStore(server.client(), "aof"), capacity=8, alpha=0.6, beta=0.4,
                             rate_limiter=RateLimiter(1), seed=0)


def test_table_survives_a_redis_restart(redis_factory, tmp_path):
    rng = np.random.default_rng(0)
    data = [encode_transition(random_transition(20, 1122, rng)) for _ in range(10)]
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
