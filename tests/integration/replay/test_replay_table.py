"""PrioritizedReplay against a real redis-server: contents, weights, eviction, restart, rate limiting."""

import threading
import time

import numpy as np
import pytest
from oracles.records import decode_transition
from scipy import stats

from phylorl.nets.synthetic import random_transition
from phylorl.records.codec import encode_transition
from phylorl.replay.rate_limiter import RateLimiter
from services.replay.buffer import (
    NothingToSample,
    PrioritizedReplay,
    RateLimited,
    ReplayClosed,
    TooManyWaiting,
)
from services.replay.store import RedisStore

PREFIX = "test:replay"
CACHE = {"records": True}


@pytest.fixture(autouse=True, params=[True, False], ids=["cached", "redis-reads"])
def record_cache(request):
    """Every test runs with samples served from the table's record cache and straight from Redis."""
    CACHE["records"] = request.param
    yield request.param
    CACHE["records"] = True


def make_table(
    client, capacity=16, alpha=1.0, beta=0.5, min_size=1, spi=0.0, error_buffer=1.0, max_waiting=None, seed=0
):
    return PrioritizedReplay(
        RedisStore(client, PREFIX),
        capacity=capacity,
        alpha=alpha,
        beta=beta,
        rate_limiter=RateLimiter(min_size, spi, error_buffer),
        seed=seed,
        max_waiting=max_waiting,
        cache_records=CACHE["records"],
    )


def wait_until(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def records(n, seed=0, n_taxa=6):
    rng = np.random.default_rng(seed)
    return [encode_transition(random_transition(n_taxa, rng)) for _ in range(n)]


def test_sampled_records_are_the_inserted_ones(redis_client):
    table = make_table(redis_client)
    data = records(10)
    keys = table.insert(data, np.ones(10)).keys
    np.testing.assert_array_equal(keys, np.arange(10))
    batch = table.sample(32)
    assert batch.size == 10
    for key, got in zip(batch.keys, batch.records):
        assert got == data[key]
        decode_transition(got)


def test_records_across_insert_batches_after_eviction_and_restart_are_the_inserted_ones(redis_client):
    table = make_table(redis_client, capacity=6)
    data = records(9)
    for lo, hi in ((0, 3), (3, 4), (4, 6), (6, 9)):  # keys 0..2 evicted, the batch of key 3 whole
        table.insert(data[lo:hi])
    for reader in (table, make_table(redis_client, capacity=6)):  # the second rebuilt from Redis
        batch = reader.sample(64)
        assert set(batch.keys.tolist()) == {3, 4, 5, 6, 7, 8}
        assert all(got == data[key] for key, got in zip(batch.keys, batch.records))


def test_importance_weights_hand_computed(redis_client):
    # alpha 1: P = p / 10 for p = 1, 2, 3, 4; N = 4, beta 0.5: w = (4 P)^-0.5 / max = sqrt(p_min / p)
    table = make_table(redis_client, alpha=1.0, beta=0.5)
    table.insert(records(4), np.array([1.0, 2.0, 3.0, 4.0]))
    batch = table.sample(64)
    p = batch.keys + 1.0
    np.testing.assert_allclose(batch.probabilities, p / 10.0, rtol=1e-15)
    expected = (4 * p / 10.0) ** -0.5
    np.testing.assert_allclose(batch.weights, expected / expected.max(), rtol=1e-6)
    # stratified: 64 draws over masses 0.1..0.4 give each key 6.4k draws +- 1
    assert abs(np.sum(batch.keys == 0) - 6.4) <= 1 and abs(np.sum(batch.keys == 3) - 25.6) <= 1
    # beta given per call; beta 0 gives uniform weights
    np.testing.assert_array_equal(table.sample(8, beta=0.0).weights, np.ones(8, np.float32))


def test_sampling_frequencies_follow_priority_to_the_alpha(redis_client):
    table = make_table(redis_client, capacity=20, alpha=0.7)
    priorities = np.linspace(0.0, 3.0, 12)  # key 0 has priority 0: never drawn
    table.insert(records(12), priorities)
    keys = np.concatenate([table.sample(100).keys for _ in range(60)])
    counts = np.bincount(keys, minlength=12)
    assert counts[0] == 0
    expected = keys.size * priorities[1:] ** 0.7 / np.sum(priorities[1:] ** 0.7)
    assert stats.chisquare(counts[1:], expected).pvalue > 1e-3


def test_fifo_eviction_removes_from_redis_and_from_sampling(redis_client):
    table = make_table(redis_client, capacity=5)
    data = records(8)
    table.insert(data[:3])
    table.insert(data[3:8], np.full(5, 2.0))
    s = table.stats()
    assert (s.size, s.next_key, s.evicted_total) == (5, 8, 3)
    held, priorities = table.priorities()
    np.testing.assert_array_equal(held, [3, 4, 5, 6, 7])
    np.testing.assert_array_equal(priorities, 2.0)
    # the first insert's batch lost all its keys: gone from Redis
    assert redis_client.exists(f"{PREFIX}:b:0") == 0 and redis_client.exists(f"{PREFIX}:b:3") == 1
    assert redis_client.lrange(f"{PREFIX}:bi", 0, -1) == [b"3:5"]
    assert set(table.sample(200).keys) == {3, 4, 5, 6, 7}
    with pytest.raises(ValueError, match="1..capacity=5"):
        table.insert(records(6))
    # keys 3 and 4 evicted: their batch stays while it holds live keys; their later priorities go with it
    table.update_priorities(np.array([4, 6]), np.array([9.0, 0.5]))
    assert redis_client.hlen(f"{PREFIX}:p") == 2
    table.insert(data[:2])
    assert set(table.sample(200).keys) == {5, 6, 7, 8, 9}
    assert redis_client.lrange(f"{PREFIX}:bi", 0, -1) == [b"3:5", b"8:2"]
    table.insert(data[:3])
    assert redis_client.lrange(f"{PREFIX}:bi", 0, -1) == [b"8:2", b"10:3"]
    assert redis_client.exists(f"{PREFIX}:b:3") == 0 and redis_client.hlen(f"{PREFIX}:p") == 0


def test_default_priority_is_the_largest_seen(redis_client):
    table = make_table(redis_client)
    table.insert(records(2), np.array([0.5, 7.0]))
    table.insert(records(1))
    np.testing.assert_array_equal(table.priorities()[1], [0.5, 7.0, 7.0])


def test_update_priorities_skips_evicted_keys_and_last_repeat_wins(redis_client):
    table = make_table(redis_client, capacity=4)
    table.insert(records(3))
    table.insert(records(3))  # keys 2..5 held
    updated = table.update_priorities(np.array([0, 3, 3, 5, 99]), np.array([9.0, 1.0, 4.0, 0.25, 9.0]))
    assert updated == 2
    np.testing.assert_array_equal(table.priorities()[1], [1.0, 4.0, 1.0, 0.25])
    assert table.stats().total_priority == 6.25
    with pytest.raises(ValueError, match="finite and >= 0"):
        table.update_priorities(np.array([3]), np.array([-1.0]))
    with pytest.raises(ValueError, match="expected 2 priorities"):
        table.update_priorities(np.array([3, 4]), np.array([1.0]))


def test_restart_comes_back_with_the_same_contents_and_priorities(redis_client):
    table = make_table(redis_client, capacity=6, alpha=0.6)
    data = records(9)
    table.insert(data[:5], np.arange(1.0, 6.0))
    table.insert(data[5:], np.array([0.5, 0.0, 8.0, 2.5]))  # evicts keys 0..2
    table.update_priorities(np.array([4, 8]), np.array([3.25, 0.125]))
    before = table.stats()
    keys, priorities = table.priorities()
    table.close()

    again = make_table(redis_client, capacity=6, alpha=0.6)
    after = again.stats()
    assert (after.size, after.next_key, after.total_priority, after.max_priority) == (
        before.size,
        before.next_key,
        before.total_priority,
        8.0,
    )
    keys2, priorities2 = again.priorities()
    np.testing.assert_array_equal(keys2, keys)
    np.testing.assert_array_equal(priorities2, priorities)
    batch = again.sample(500)
    for key, got in zip(batch.keys, batch.records):
        assert got == data[key]
    weight = priorities2**0.6
    np.testing.assert_allclose(batch.probabilities, weight[batch.keys - 3] / weight.sum(), rtol=1e-12)
    assert again.insert(records(1)).keys[0] == 9  # keys continue, never reused


def test_a_batch_lost_from_redis_is_reported(redis_client, record_cache):
    make_table(redis_client, capacity=8).insert(records(4))
    redis_client.delete(f"{PREFIX}:b:0")
    with pytest.raises(RuntimeError, match="test:replay:b:0 is missing or truncated: the table is corrupt"):
        make_table(redis_client, capacity=8)


def test_a_batch_lost_while_serving_is_reported_by_sample(redis_client, record_cache):
    table = make_table(redis_client, capacity=8)
    table.insert(records(4))
    redis_client.delete(f"{PREFIX}:b:0")  # behind the service's back
    if record_cache:  # samples come from the service's copy
        assert len(table.sample(4).records) == 4
    else:  # every draw misses, again and again
        with pytest.raises(RuntimeError, match="transitions kept disappearing while sampling"):
            table.sample(4)


def test_a_table_of_another_layout_is_refused_and_left_as_it_is(redis_client):
    redis_client.hset(f"{PREFIX}:meta", mapping={"head": 1, "next_key": 5, "layout": "1"})
    with pytest.raises(RuntimeError, match="has layout b'1'; this service reads layout b'2' only"):
        make_table(redis_client, capacity=8)
    assert redis_client.hget(f"{PREFIX}:meta", "layout") == b"1"


def test_restart_with_smaller_capacity_evicts_the_oldest(redis_client):
    make_table(redis_client, capacity=10).insert(records(8))
    smaller = make_table(redis_client, capacity=5)
    np.testing.assert_array_equal(smaller.priorities()[0], [3, 4, 5, 6, 7])
    assert redis_client.lrange(f"{PREFIX}:bi", 0, -1) == [b"0:8"]  # still holds keys 3..7
    assert redis_client.hget(f"{PREFIX}:meta", "head") == b"3"


def test_sample_below_min_size_times_out_with_a_clear_message(redis_client):
    table = make_table(redis_client, min_size=5)
    table.insert(records(3))
    with pytest.raises(
        RateLimited,
        match="sample of 4 not admitted within 0.05 s: the table holds 3 "
        "transitions, fewer than min_size_to_sample=5",
    ):
        table.sample(4, timeout_s=0.05)


def test_a_waiting_sample_is_released_by_an_insert(redis_client):
    table = make_table(redis_client, min_size=4)
    table.insert(records(2))
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("batch", table.sample(3, timeout_s=20)))
    thread.start()
    wait_until(lambda: table.stats().waiting_samples == 1)  # blocked on the minimum size
    table.insert(records(2, seed=1))
    thread.join(timeout=20)
    assert not thread.is_alive() and result["batch"].size == 4


def test_inserts_wait_for_samples_under_a_samples_per_insert_ratio(redis_client):
    table = make_table(redis_client, capacity=100, min_size=2, spi=1.0, error_buffer=2.0)
    table.insert(records(4))  # diff 4 >= target 2 + 2: the next insert must wait
    with pytest.raises(RateLimited, match="inserting is ahead of sampling"):
        table.insert(records(1), timeout_s=0.05)
    table.sample(1)  # diff 3 < 4: admitted
    table.insert(records(1))


def test_concurrent_inserters_and_samplers_never_deadlock(redis_client):
    table = make_table(redis_client, capacity=64, min_size=8, spi=2.0, error_buffer=6.0)
    data = records(4)
    done = threading.Event()
    failures, inserted = [], []

    def insert_loop():
        try:
            for _ in range(15):
                inserted.append(len(table.insert(data, timeout_s=20).keys))
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            failures.append(e)

    def sample_loop():
        while not done.is_set():
            try:
                table.sample(5, timeout_s=0.05)
            except RateLimited:
                pass
            except Exception as e:  # noqa: BLE001
                failures.append(e)
                return

    inserters = [threading.Thread(target=insert_loop) for _ in range(3)]
    samplers = [threading.Thread(target=sample_loop) for _ in range(2)]
    for t in inserters + samplers:
        t.start()
    for t in inserters:
        t.join(timeout=60)
    done.set()
    for t in samplers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in inserters + samplers)
    assert failures == [] and sum(inserted) == 180
    s = table.stats()
    # balance within its bounds, give or take one call: [16 - 6 - 5, 16 + 6 + 2 * 4]
    assert s.inserted_total == 180 and 5 <= s.rate_limiter_diff <= 30
    assert s.sampled_total >= 2 * 180 - 16 - 6 - 5


def test_too_many_waiting_calls_are_refused_at_once(redis_client):
    table = make_table(redis_client, min_size=10, max_waiting=1)
    waiting = threading.Thread(target=lambda: pytest.raises(ReplayClosed, table.sample, 1, timeout_s=30))
    waiting.start()
    wait_until(lambda: table.stats().waiting_samples == 1)
    # refused for the number of waiting calls (a timed-out wait would give a rate-limit message instead)
    with pytest.raises(TooManyWaiting, match="1 sample calls already wait"):
        table.sample(1, timeout_s=30)
    table.close()
    waiting.join(timeout=10)
    assert not waiting.is_alive()


def test_close_wakes_waiting_calls(redis_client):
    table = make_table(redis_client, min_size=10)
    errors = []

    def wait_for_sample():
        try:
            table.sample(1, timeout_s=60)
        except ReplayClosed as e:
            errors.append(e)

    thread = threading.Thread(target=wait_for_sample)
    thread.start()
    wait_until(lambda: table.stats().waiting_samples == 1)
    table.close()
    thread.join(timeout=10)
    assert not thread.is_alive() and "shutting down" in str(errors[0])


def test_all_zero_priorities_cannot_be_sampled(redis_client):
    table = make_table(redis_client, alpha=0.5)
    table.insert(records(3), np.zeros(3))
    with pytest.raises(NothingToSample, match="all 3 held transitions have priority 0"):
        table.sample(2)


def test_the_service_table_and_the_in_process_replay_draw_the_same_keys(redis_client):
    """Both drive one PriorityTable: the same inserts, priorities and seed give the same draws and
    weights, and the same priority updates."""
    from memory_replay import MemoryReplay

    table = make_table(redis_client, capacity=5, alpha=0.7, beta=0.5, seed=3)
    memory = MemoryReplay(capacity=5, alpha=0.7, beta=0.5, seed=3)
    data = records(7)
    rng = np.random.default_rng(0)
    for start in (0, 3, 5):
        priorities = rng.uniform(0.1, 2.0, size=len(data[start : start + 3]))
        table.insert(data[start : start + 3], priorities)
        memory.insert(data[start : start + 3], priorities)
    batch = table.sample(16)
    drawn, weights, keys = memory.sample(16)
    assert np.array_equal(batch.keys, keys) and np.allclose(batch.weights, weights)
    assert [bytes(r) for r in batch.records] == [bytes(r) for r in drawn]
    new = rng.uniform(0.1, 2.0, size=keys.size)
    assert table.update_priorities(keys, new) == memory.update_priorities(keys, new)
    assert np.array_equal(table.sample(16).keys, memory.sample(16)[2])
