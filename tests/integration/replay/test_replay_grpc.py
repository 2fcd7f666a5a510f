"""ReplayService through real gRPC servers on 127.0.0.1 and a real redis-server."""

import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import assert_same_transition
from oracles.records import decode_transition
from scipy import stats

from phylorl.nets.synthetic import random_transition
from phylorl.records.batch import NOT_FINITE, REASONS, UNREADABLE
from phylorl.records.codec import encode_transition
from phylorl.replay.rate_limiter import RateLimiter
from phylorl.wire.v1 import replay_pb2, replay_pb2_grpc
from services.replay.buffer import PrioritizedReplay
from services.replay.client import ReplayClient
from services.replay.server import SERVICE_NAME, ReplayServer
from services.replay.store import RedisStore

PREFIX = "test:grpc"


@pytest.fixture
def serve(redis_client):
    """Start ReplayServers (port 0 = free port) on tables in the test Redis; all stopped afterwards."""
    running = []

    def start(
        capacity=64,
        alpha=1.0,
        beta=0.4,
        min_size=1,
        spi=0.0,
        error_buffer=1.0,
        max_workers=8,
        default_timeout_s=5.0,
    ):
        table = PrioritizedReplay(
            RedisStore(redis_client, PREFIX),
            capacity=capacity,
            alpha=alpha,
            beta=beta,
            rate_limiter=RateLimiter(min_size, spi, error_buffer),
            seed=7,
            max_waiting=(max_workers - 1) // 2,
        )
        server = ReplayServer(
            host="127.0.0.1",
            port=0,
            max_workers=max_workers,
            max_message_bytes=64 * 1024 * 1024,
            default_timeout_s=default_timeout_s,
        )
        server.start()
        server.serve(table)
        client = ReplayClient(f"127.0.0.1:{server.port}")
        running.append((server, client))
        return server, client

    yield start
    for server, client in running:
        client.close()
        server.stop(grace_s=1.0)


def transitions(n, seed=0, n_taxa=20):
    rng = np.random.default_rng(seed)
    return [random_transition(n_taxa, rng) for _ in range(n)]


def test_health_is_serving(serve):
    server, client = serve()
    client.wait_until_serving(timeout_s=10)
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE_NAME):
            response = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_insert_and_sample_round_trip_realistic_transitions(serve):
    _, client = serve()
    data = transitions(6)
    keys = client.insert(data, priorities=np.arange(1.0, 7.0), timeout_s=5)
    np.testing.assert_array_equal(keys, np.arange(6))
    batch = client.sample(12, timeout_s=5)
    assert batch.keys.dtype == np.int64 and batch.weights.dtype == np.float32 and batch.size == 6
    np.testing.assert_allclose(batch.probabilities, (batch.keys + 1) / 21.0, rtol=1e-15)
    expected = (6 * (batch.keys + 1) / 21.0) ** -0.4
    np.testing.assert_allclose(batch.weights, expected / expected.max(), rtol=1e-6)
    for key, got in zip(batch.keys, map(decode_transition, batch.records)):
        assert_same_transition(got, data[key])


def test_sampling_frequencies_are_proportional_to_priorities(serve):
    _, client = serve(alpha=1.0)
    priorities = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 4.0, 7.0, 0.25])
    client.insert(transitions(8, n_taxa=5), priorities)
    keys = np.concatenate([client.sample(128).keys for _ in range(40)])
    counts = np.bincount(keys, minlength=8)
    assert counts[0] == 0  # priority 0 is never drawn
    expected = keys.size * priorities[1:] / priorities.sum()
    assert stats.chisquare(counts[1:], expected).pvalue > 1e-3


def test_update_priorities_and_stats(serve):
    _, client = serve(capacity=4)
    client.insert(transitions(3, n_taxa=5))
    client.insert(transitions(3, seed=1, n_taxa=5))  # keys 2..5 held
    assert client.update_priorities(np.array([0, 2, 5]), np.array([5.0, 2.0, 0.5])) == 2
    s = client.stats()
    assert (s.size, s.capacity, s.inserted_total, s.evicted_total, s.next_key) == (4, 4, 6, 2, 6)
    assert s.total_priority == 2.0 + 1.0 + 1.0 + 0.5 and s.max_priority == 2.0 and s.alpha == 1.0


def test_restart_serves_the_same_contents_and_priorities(serve):
    server, client = serve(capacity=5, alpha=0.5)
    data = transitions(7, n_taxa=10)
    client.insert(data[:4], np.array([1.0, 2.0, 3.0, 4.0]))
    client.insert(data[4:], np.array([0.5, 6.0, 0.25]))
    client.update_priorities(np.array([3, 6]), np.array([9.0, 1.5]))
    before = client.stats()
    client.close()
    server.stop(grace_s=1.0)

    _, again = serve(capacity=5, alpha=0.5)
    after = again.stats()
    assert (after.size, after.next_key, after.total_priority) == (
        before.size,
        before.next_key,
        before.total_priority,
    )
    assert after.size == 5
    raw = {2: 3.0, 3: 9.0, 4: 0.5, 5: 6.0, 6: 1.5}
    total = sum(p**0.5 for p in raw.values())
    batch = again.sample(300)
    assert set(batch.keys) == set(raw)
    np.testing.assert_allclose(batch.probabilities, [raw[k] ** 0.5 / total for k in batch.keys], rtol=1e-12)
    for key, t in zip(batch.keys, map(decode_transition, batch.records)):
        assert_same_transition(t, data[key])


def test_rate_limited_sample_returns_deadline_exceeded_with_the_reason(serve):
    _, client = serve(min_size=3)
    client.insert(transitions(1, n_taxa=5))
    with pytest.raises(grpc.RpcError) as err:
        client.sample(2, timeout_s=0.1)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "fewer than min_size_to_sample=3" in err.value.details()


def test_caller_deadline_shorter_than_the_wait_still_gets_the_reason(serve):
    server, _ = serve(min_size=3, default_timeout_s=30)
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = replay_pb2_grpc.ReplayServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.Sample(replay_pb2.SampleRequest(batch_size=1), timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "min_size_to_sample" in err.value.details()


def test_bad_requests_are_invalid_argument_or_failed_precondition(serve):
    _, client = serve(alpha=1.0)
    with pytest.raises(grpc.RpcError) as err:
        client.insert_records([b"not a record"])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == f"record 0: {REASONS[UNREADABLE]}"
    with pytest.raises(grpc.RpcError) as err:
        client.insert(transitions(2, n_taxa=5), priorities=np.array([1.0, np.nan]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "finite" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        client.sample(0)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "batch_size" in err.value.details()
    client.insert(transitions(2, n_taxa=5), priorities=np.zeros(2))
    with pytest.raises(grpc.RpcError) as err:
        client.sample(1)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "priority 0" in err.value.details()


def test_blocked_inserts_cannot_starve_the_sample_that_frees_them(serve):
    # 3 handler threads: at most one insert may wait, so a thread stays free for the sampler
    _, client = serve(capacity=100, min_size=1, spi=1.0, error_buffer=1.0, max_workers=3)
    data = transitions(1, n_taxa=5)
    client.insert(data)  # balance 1 + 1 > target 1 + 1 - 1: the next insert waits
    client.insert(data)
    codes = []

    def insert():
        try:
            client.insert(data, timeout_s=10)
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as e:
            codes.append(e.code())

    threads = [threading.Thread(target=insert) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(codes) < 3 and time.monotonic() < deadline:  # one insert waits, three are refused
        time.sleep(0.01)
    assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3
    batch = client.sample(3, timeout_s=10)  # served although an insert is waiting
    assert batch.keys.size == 3
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3 + [grpc.StatusCode.OK]


def test_a_corrupt_record_is_retired_by_the_learner_and_training_goes_on(serve, redis_client, tmp_path):
    """A record with a valid header but a broken body (damaged in Redis, read back by a service that reopened
    the table) does not stop the learner's sampling: it is dropped from the batch, counted, and its priority
    set to 0 in the real replay service, so it is never drawn again."""
    import threading

    from phylorl.agent.learner import Learner
    from phylorl.nets.config import NetworkConfig
    from services.learner import metrics
    from services.learner.config import LearnerConfig
    from services.learner.training import Checkpoints, TrainingLoop

    _, first = serve(capacity=64)
    good = [encode_transition(t) for t in transitions(5, n_taxa=6)]
    keys = np.concatenate(
        [first.insert_records(good, np.ones(5)), first.insert_records(good[:1], np.ones(1))]
    )
    # the last record's batch: "<4sI" header, 1 priority, 2 offsets, the record
    batch = f"{PREFIX}:b:{keys[5]}"
    start = 8 + 8 + 2 * 4
    # body garbage
    redis_client.setrange(batch, start + 40, b"\xff" * (redis_client.strlen(batch) - start - 40))
    _, client = serve(capacity=64)  # reads the table back from Redis
    config = LearnerConfig(batch_size=64, run_dir=str(tmp_path), redis_url="")
    loop = TrainingLoop(
        config,
        Learner(NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)),
        client,
        inference=None,
        redis_client=None,
        checkpoints=Checkpoints(tmp_path, 1),
        stop=threading.Event(),
    )
    before = metrics.CORRUPT_RECORDS._value.get()
    batch, drawn = loop._sample()
    assert batch.weights.shape[0] == len(drawn) and keys[5] not in drawn
    assert metrics.CORRUPT_RECORDS._value.get() > before
    bad_keys, zeros = loop._priorities.get_nowait()
    assert list(bad_keys) == [keys[5]] and not zeros.any()
    client.update_priorities(bad_keys, zeros)
    for _ in range(5):  # retired: never drawn again
        assert keys[5] not in loop._sample()[1]


def test_inserts_are_idempotent_per_producer_and_the_marks_survive_a_restart(serve, redis_client):
    """A producer's resend of records it numbered stores each number once: a whole batch again, and a
    batch overlapping the stored numbers; a restarted service (its table rebuilt from Redis) remembers."""
    from services.replay import metrics

    server, client = serve(capacity=64)
    data = [encode_transition(t) for t in transitions(6, n_taxa=6)]
    before = metrics.DUPLICATES._value.get()
    first = client.insert_records(data[:4], np.ones(4), producer="actor-a", first_sequence=0)
    assert len(first) == 4
    assert len(client.insert_records(data[:4], np.ones(4), producer="actor-a", first_sequence=0)) == 0
    overlapping = client.insert_records(data[2:6], np.ones(4), producer="actor-a", first_sequence=2)
    np.testing.assert_array_equal(overlapping, [4, 5])  # numbers 4 and 5 are new, 2 and 3 were stored
    # its own
    assert len(client.insert_records(data[:2], np.ones(2), producer="actor-b", first_sequence=0)) == 2
    assert len(client.insert_records(data[:2], np.ones(2))) == 2  # no producer: no deduplication
    assert metrics.DUPLICATES._value.get() - before == 6
    assert redis_client.hgetall(f"{PREFIX}:seq") == {b"actor-a": b"5", b"actor-b": b"1"}
    _, restarted = serve(capacity=64)  # a new service on the same Redis rebuilds its table, marks included
    assert len(restarted.insert_records(data[:6], np.ones(6), producer="actor-a", first_sequence=0)) == 0
    assert restarted.stats().size == 4 + 2 + 2 + 2


def test_environment_records_are_checked_and_a_bad_one_is_named(serve):
    """Records as actors send them pass the service's compiled check; a batch with a bad one is refused,
    naming it."""
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo.simulate import simulate_dataset
    from phylorl.types import Transition

    _, client = serve(capacity=64)
    alignment = simulate_dataset(8, 200, np.random.default_rng(4)).alignment
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "a")], EnvConfig(), seed=0
    )
    obs, _ = env.reset()
    records = []
    for action in (0, 5, 9):
        nxt, reward, _, _, _ = env.step(action)
        records.append(encode_transition(Transition(obs, action, reward, nxt, False, False, 0.99)))
        obs = nxt
    assert len(client.insert_records(records)) == 3
    bad = encode_transition(Transition(obs, 1, float("nan"), obs, False, False, 0.99))
    with pytest.raises(grpc.RpcError) as err:
        client.insert_records(records + [bad])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == f"record 3: {REASONS[NOT_FINITE]}"
