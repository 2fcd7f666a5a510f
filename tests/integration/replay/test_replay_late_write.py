"""A write whose answer was lost lands in Redis later (a stall outlasting the client's timeout).

The replay service gives up on a write when Redis does not answer in time, but the request is already on its
way: Redis may still run it after the service has re-read the table and moved on. A real TCP proxy between the
service and a real ``redis-server`` holds one connection's bytes and lets them through on demand, so the late
write lands at a chosen moment. Whatever the moment, the table in Redis must stay whole (its batch index
covering the held keys without gaps) and the service must go on inserting and sampling."""

from __future__ import annotations

import contextlib
import socket
import threading

import numpy as np
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from replay_audit import read_table

from phylorl.nets.synthetic import random_transition
from phylorl.records.codec import encode_transition
from phylorl.replay.rate_limiter import RateLimiter
from services.replay.buffer import PrioritizedReplay
from services.replay.store import RedisStore


class _Link:
    """One proxied connection; while ``held``, the client's bytes wait in the proxy."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client, self.upstream = client, upstream
        self.held, self.closed, self.pending = False, False, bytearray()
        self.lock = threading.Lock()
        threading.Thread(target=self._up, daemon=True).start()
        self.downstream = threading.Thread(target=self._down, daemon=True)
        self.downstream.start()

    def _up(self) -> None:
        while True:
            try:
                data = self.client.recv(65536)
            except OSError:
                data = b""
            with self.lock:
                if not data:
                    self.closed = True
                    if not self.held:
                        _shutdown(self.upstream)
                    return
                if self.held:
                    self.pending += data
                else:
                    self.upstream.sendall(data)

    def _down(self) -> None:
        while True:
            try:
                data = self.upstream.recv(65536)
                if not data:
                    break
                self.client.sendall(data)
            except OSError:
                break
        _shutdown(self.client)

    def release(self) -> None:
        with self.lock:
            self.held = False
            self.upstream.sendall(bytes(self.pending))
            self.pending.clear()
            if self.closed:
                _shutdown(self.upstream)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


class HoldingProxy:
    """Forwards loopback TCP to ``port``; :meth:`hold` stops the bytes of the connections open now."""

    def __init__(self, port: int):
        self._upstream_port = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.links: list[_Link] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.links.append(_Link(client, socket.create_connection(("127.0.0.1", self._upstream_port))))

    def hold(self) -> list[_Link]:
        held = [link for link in self.links if not link.closed]
        for link in held:
            link.held = True
        return held

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def proxied(redis_server):
    proxy = HoldingProxy(redis_server.port)
    # no retries: redis-py would resend a timed-out pipeline on a fresh (unheld) connection; a stall that
    # outlasts every retry is this case
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=0.5, retry=Retry(NoBackoff(), 0))
    redis_server.client().flushdb()
    yield proxy, client, redis_server.client()
    client.close()
    proxy.close()


def _table(client: redis.Redis, prefix: str, capacity: int = 1000, seed: int = 0) -> PrioritizedReplay:
    return PrioritizedReplay(
        RedisStore(client, prefix),
        capacity=capacity,
        alpha=0.6,
        beta=0.4,
        rate_limiter=RateLimiter(1),
        seed=seed,
    )


def _lost_after_first(proxy, table) -> tuple[list[bytes], list[bytes], list[_Link]]:
    """Keys 0..4 inserted, then 4 records whose insert times out with its bytes held in the proxy."""
    first, lost = _records(5, 0), _records(4, 1)
    table.insert(first, np.ones(5))
    return first, lost, _late_insert(proxy, table, lost)


def _records(count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [encode_transition(random_transition(6, rng)) for _ in range(count)]


def _late_insert(proxy, table, records) -> list[_Link]:
    """Insert ``records`` while the connection is held: the call times out, the bytes stay in the proxy."""
    held = proxy.hold()
    assert held, "the table's connection to Redis should be open"
    with pytest.raises(redis.TimeoutError):
        table.insert(records, np.ones(len(records)))
    return held


def _land(held: list[_Link]) -> None:
    """Let the held bytes through and wait until Redis has run them: the client has gone, so Redis runs
    what it was sent and then closes the connection."""
    for link in held:
        link.release()
    for link in held:
        link.downstream.join(timeout=10)
        assert not link.downstream.is_alive(), "Redis did not close the abandoned connection"


def _check_whole(direct: redis.Redis, prefix: str, expected: dict[int, bytes]) -> None:
    stored = read_table(direct, prefix)
    keys = list(range(stored.head, stored.next_key))
    assert keys == sorted(expected), f"Redis holds keys {keys}, expected {sorted(expected)}"
    assert stored.records == [expected[k] for k in keys]
    table = _table(direct, prefix, seed=1)
    batch = table.sample(64)
    assert all(record == expected[key] for key, record in zip(batch.keys.tolist(), batch.records))


def test_a_late_write_landing_after_the_next_insert_is_refused(proxied):
    proxy, client, direct = proxied
    table = _table(client, "late")
    first, lost, held = _lost_after_first(proxy, table)
    after = _records(3, 2)
    keys = table.insert(after, np.ones(3)).keys  # re-reads the table (without ``lost``), then writes
    assert keys.tolist() == [5, 6, 7]
    _land(held)
    expected = dict(enumerate(first + after))
    _check_whole(direct, "late", expected)
    more = _records(2, 3)
    assert table.insert(more, np.ones(2)).keys.tolist() == [8, 9]
    expected.update({8: more[0], 9: more[1]})
    _check_whole(direct, "late", expected)


def test_a_late_write_landing_between_the_reread_and_the_next_insert_is_kept(proxied):
    proxy, client, direct = proxied
    table = _table(client, "late2")
    first, lost, held = _lost_after_first(proxy, table)
    after = _records(3, 2)
    table.update_priorities(np.zeros(0, dtype=np.int64), np.zeros(0))  # re-reads the table without ``lost``
    _land(held)  # ``lost`` lands now, as keys 5..8
    keys = table.insert(after, np.ones(3)).keys
    assert keys.tolist() == [9, 10, 11]
    _check_whole(direct, "late2", dict(enumerate(first + lost + after)))
    batch = table.sample(64)
    assert set(batch.keys.tolist()) <= set(range(12))


def test_a_priority_update_after_a_late_write_landed_re_reads_and_is_kept(proxied):
    proxy, client, direct = proxied
    table = _table(client, "late4")
    first, lost, held = _lost_after_first(proxy, table)
    table.update_priorities(np.zeros(0, dtype=np.int64), np.zeros(0))  # re-reads the table without ``lost``
    _land(held)
    assert table.update_priorities(np.array([1, 7]), np.array([5.0, 6.0])) == 2  # key 7 is held once re-read
    keys, priorities = table.priorities()
    assert keys.tolist() == list(range(9)) and priorities[1] == 5.0 and priorities[7] == 6.0


def test_no_staged_batch_is_left_behind_and_a_flushed_script_cache_is_refilled(proxied):
    proxy, client, direct = proxied
    table = _table(client, "late3", 6, 0)
    first, lost, held = _lost_after_first(proxy, table)
    # as after a Redis restart: the next write sends the script itself
    direct.script_flush()
    after = _records(3, 2)
    assert table.insert(after, np.ones(3)).keys.tolist() == [5, 6, 7]  # evicts keys 0 and 1
    _land(held)  # refused: its staged batch is dropped with it
    assert list(direct.scan_iter("late3:*staged*")) == []
    _check_whole(direct, "late3", {k: v for k, v in enumerate(first + after) if k >= 2})


def test_a_second_writer_on_the_same_prefix_is_refused_then_followed(redis_client):
    one = _table(redis_client, "two", 100, 0)
    other = _table(redis_client, "two", 100, 0)
    a, b, c = _records(3, 0), _records(2, 1), _records(4, 2)
    assert one.insert(a, np.ones(3)).keys.tolist() == [0, 1, 2]
    assert other.insert(b, np.ones(2)).keys.tolist() == [3, 4]  # its view (empty) was stale: it re-read
    assert one.insert(c, np.ones(4)).keys.tolist() == [5, 6, 7, 8]
    _check_whole(redis_client, "two", dict(enumerate(a + b + c)))


def test_a_redis_user_who_may_not_run_the_script_is_named_when_the_table_opens(redis_server, redis_client):
    redis_client.execute_command(
        "ACL", "SETUSER", "noscript", "on", ">pw", "~*", "+@all", "-eval", "-evalsha"
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=redis_server.port, username="noscript", password="pw")
        with pytest.raises(
            RuntimeError, match=r"may not run the replay store's guarded writes.*make_secrets"
        ):
            _table(client, "acl", 10, 0)
        client.close()
    finally:
        redis_client.execute_command("ACL", "DELUSER", "noscript")
