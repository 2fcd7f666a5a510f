"""The actor against a real inference endpoint: a transient status is retried, anything else stops it.

The endpoint's network reads the basic observation while the actor sends the rich one, so every request
is answered INVALID_ARGUMENT (a real misconfiguration, not a fault injected by a test double): retrying it
would loop forever, so the actor must stop with the error at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment
from phylorl.env.vec_env import VecTreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import parse_model
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from services.actor import metrics
from services.actor.actor import Actor
from services.actor.config import ActorConfig
from services.replay.client import ReplayClient

BASIC = NetworkConfig(features="basic", hidden=16, action_hidden=16, head_hidden=16)


def serve_replay(redis_client, prefix: str, port: int, limiter=None):
    """A real replay service on ``port`` (where the actor has been sending all along) over the test Redis;
    ``limiter``: its rate limiter (none but a minimum size of 1 unless given)."""
    from phylorl.replay import RateLimiter
    from services.replay.buffer import PrioritizedReplay
    from services.replay.server import ReplayServer
    from services.replay.store import RedisStore

    table = PrioritizedReplay(
        RedisStore(redis_client, prefix),
        capacity=10_000,
        alpha=0.6,
        beta=0.4,
        rate_limiter=limiter or RateLimiter(1, 0.0),
    )
    server = ReplayServer(
        host="127.0.0.1", port=port, max_workers=4, max_message_bytes=64 << 20, default_timeout_s=5.0
    )
    server.start()
    server.serve(table)
    return table, server


def test_a_non_transient_status_stops_the_actor_instead_of_retrying(inference_factory, free_port_factory):
    basic_endpoint = inference_factory(BASIC)
    data = simulate_dataset(6, 100, dataset_rng(3, 0), model=parse_model("JC"))
    entry = EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")
    envs = VecTreeEnv([entry], 1, EnvConfig(horizon=4, features="rich"), seed=0)
    config = ActorConfig(
        learner_address=basic_endpoint,
        replay_address=f"127.0.0.1:{free_port_factory()}",
        alignments="unused",
        metrics_port=0,
        backoff_max_s=0.2,
        rpc_timeout_s=10.0,
    )
    reconnects = metrics.RECONNECTS.labels("inference")._value.get()
    stop = threading.Event()
    channel = grpc.insecure_channel(basic_endpoint)
    actor = Actor(config, envs, channel, ReplayClient(config.replay_address), stop)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as raised:
        actor.run()
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "edge feature columns" in raised.value.details()  # the endpoint says what is wrong
    assert time.monotonic() - started < 10.0 and actor.steps == 0
    assert metrics.RECONNECTS.labels("inference")._value.get() == reconnects  # not retried
    channel.close()


def test_transitions_wait_on_disk_while_replay_is_away_and_each_is_stored_once(
    tmp_path, redis_client, free_port_factory, inference_factory
):
    """The actor steps with the replay service down: transitions wait in memory (8) and then in its spool
    file; the service comes up on that address and every transition is stored exactly once."""
    from phylorl.env.tree_env import EnvAlignment as Entry

    endpoint = inference_factory(NetworkConfig(features="rich", hidden=16, action_hidden=16, head_hidden=16))
    data = simulate_dataset(6, 100, dataset_rng(4, 0), model=parse_model("JC"))
    entry = Entry.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")
    envs = VecTreeEnv([entry], 2, EnvConfig(horizon=5, features="rich"), seed=0)
    replay_port = free_port_factory()
    config = ActorConfig(
        learner_address=endpoint,
        replay_address=f"127.0.0.1:{replay_port}",
        alignments="unused",
        metrics_port=0,
        backoff_max_s=0.2,
        rpc_timeout_s=2.0,
        send_batch=4,
        buffer_capacity=8,
        spool_dir=str(tmp_path / "spool"),
        max_steps=30,
    )
    stop = threading.Event()
    channel = grpc.insecure_channel(config.learner_address)
    actor = Actor(config, envs, channel, ReplayClient(config.replay_address), stop)
    runner = threading.Thread(target=actor.run)
    runner.start()
    deadline = time.monotonic() + 60
    while actor.outbox.spooled < 10:  # replay is away: memory fills, then the spool
        assert time.monotonic() < deadline and runner.is_alive()
        time.sleep(0.05)
    assert len(actor.outbox.memory) <= 8
    table, server = serve_replay(redis_client, "test:outbox", replay_port)
    try:
        runner.join(timeout=120)
        assert not runner.is_alive()
        produced = actor.outbox.next_number
        assert produced > 20 and actor.outbox.dropped == 0 and len(actor.outbox) == 0
        assert table.stats().size == produced  # every transition stored, none twice
        # the journal is gone with the actor; its ledger line counts what it made
        assert [p.name for p in (tmp_path / "spool").iterdir()] == ["ledger.jsonl"]
        line = json.loads((tmp_path / "spool" / "ledger.jsonl").read_text())
        assert line["produced"] == produced and line["pending"] == 0 and line["event"] == "stopped"
    finally:
        stop.set()
        server.stop(grace_s=1.0)
        channel.close()


def test_a_killed_actors_journal_is_sent_by_the_next_actor_and_each_transition_stored_once(
    tmp_path, redis_client, free_port_factory, inference_factory
):
    """An actor process steps with the replay service away and is killed with signal 9; a new actor on the
    same journal directory sends what the dead one had made (under its producer name), then its own: the
    table holds exactly the two actors' transitions, each once."""
    from phylorl.phylo.alignment import format_fasta
    from services.actor.outbox import read_journal
    from services.replay.audit import read_table

    endpoint = inference_factory(NetworkConfig(features="rich", hidden=16, action_hidden=16, head_hidden=16))
    data = simulate_dataset(6, 100, dataset_rng(5, 0), model=parse_model("JC"))
    fasta = tmp_path / "sim.fasta"
    fasta.write_text(format_fasta(data.alignment))
    spool, replay_port = tmp_path / "spool", free_port_factory()
    flags = [
        "--learner-address",
        endpoint,
        "--replay-address",
        f"127.0.0.1:{replay_port}",
        "--alignments",
        str(fasta),
        "--model",
        "JC",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--metrics-port",
        "0",
        "--env.horizon",
        "5",
        "--send-batch",
        "4",
        "--buffer-capacity",
        "8",
        "--spool-dir",
        str(spool),
        "--backoff-max-s",
        "0.2",
        "--rpc-timeout-s",
        "2",
        "--actor-id",
        "doomed",
    ]
    first = subprocess.Popen(
        [sys.executable, "-m", "services.actor", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        deadline = time.monotonic() + 120
        journals = []
        while not journals or read_journal(journals[0]).produced < 30:
            assert time.monotonic() < deadline and first.poll() is None, "the first actor did not step"
            time.sleep(0.2)
            journals = list(spool.glob("doomed-*.journal")) if spool.exists() else []
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    dead = read_journal(journals[0])
    assert len(dead.pending) == dead.produced >= 30  # the replay service never answered: all of it waits

    table, server = serve_replay(redis_client, "test:recover", replay_port)
    envs = VecTreeEnv(
        [EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")],
        1,
        EnvConfig(horizon=5, features="rich"),
        seed=1,
    )
    config = ActorConfig(
        learner_address=endpoint,
        replay_address=f"127.0.0.1:{replay_port}",
        alignments="unused",
        metrics_port=0,
        backoff_max_s=0.2,
        rpc_timeout_s=2.0,
        send_batch=4,
        buffer_capacity=8,
        spool_dir=str(spool),
        max_steps=10,
        actor_id="successor",
    )
    stop = threading.Event()
    channel = grpc.insecure_channel(endpoint)
    try:
        actor = Actor(config, envs, channel, ReplayClient(config.replay_address), stop)
        actor.run()
        made = actor.outbox.next_number
        assert made > 0 and table.stats().size == dead.produced + made  # every transition once, none lost
        held = read_table(redis_client, "test:recover")
        assert held.duplicates() == 0 and len(held.records) == table.stats().size
        assert held.distinct_by_producer() == {dead.producer: dead.produced, actor.run_id: made}
        assert [r for r, o in zip(held.records, held.origins) if o[0] == dead.producer] == [
            r for r, _, _ in dead.pending
        ]  # the dead actor's own records, in its order
        ledger = [json.loads(line) for line in (spool / "ledger.jsonl").read_text().splitlines()]
        assert {(x["producer"], x["produced"], x["event"]) for x in ledger} == {
            (dead.producer, dead.produced, "recovered"),
            (actor.run_id, made, "stopped"),
        }
        assert sorted(p.name for p in spool.iterdir()) == ["ledger.jsonl"]
    finally:
        stop.set()
        server.stop(grace_s=1.0)
        channel.close()


def test_a_stopped_actor_whose_insert_the_rate_limiter_holds_exits_at_once_and_keeps_it_in_its_journal(
    tmp_path, redis_client, free_port_factory, inference_factory
):
    """The end of every ``phylorl train``: the learner has its updates and samples no more, so the replay's
    rate limiter holds the actors' inserts. SIGTERM must end such an actor well before its call's timeout
    (300 s here), with exit status 0, and what the held insert
    carried must stay in the journal: stored and waiting add up to what it made."""
    from phylorl.phylo.alignment import format_fasta
    from phylorl.replay import RateLimiter
    from services.actor.outbox import read_journal

    endpoint = inference_factory(NetworkConfig(features="rich", hidden=16, action_hidden=16, head_hidden=16))
    data = simulate_dataset(6, 100, dataset_rng(6, 0), model=parse_model("JC"))
    fasta = tmp_path / "sim.fasta"
    fasta.write_text(format_fasta(data.alignment))
    spool, replay_port = tmp_path / "spool", free_port_factory()
    # inserts admitted until 4 + 4 are held with nothing sampled; then each waits
    table, server = serve_replay(redis_client, "test:held", replay_port, RateLimiter(4, 1.0, 4.0))
    flags = [
        "--learner-address",
        endpoint,
        "--replay-address",
        f"127.0.0.1:{replay_port}",
        "--alignments",
        str(fasta),
        "--model",
        "JC",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--metrics-port",
        "0",
        "--env.horizon",
        "5",
        "--send-batch",
        "4",
        "--buffer-capacity",
        "8",
        "--spool-dir",
        str(spool),
        "--rpc-timeout-s",
        "300",
        "--actor-id",
        "held",
    ]
    actor = subprocess.Popen(
        [sys.executable, "-m", "services.actor", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        deadline = time.monotonic() + 120
        while table.stats().waiting_inserts == 0:  # admitted up to the bound, then one call held
            if actor.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the actor's insert was not held")
            time.sleep(0.2)
        stored = table.stats().size
        assert 8 <= stored <= 12  # one call may overshoot the bound by its own 4
        actor.send_signal(signal.SIGTERM)
        _, errors = actor.communicate(timeout=60)
        assert actor.returncode == 0, errors.decode()[-2000:]
    finally:
        actor.kill()
        server.stop(grace_s=1.0)
    (journal,) = spool.glob("held-*.journal")  # what an actor left is kept for the next one
    left = read_journal(journal)
    assert table.stats().size == stored  # nothing was admitted after it was held
    assert len(left.pending) >= 4 and stored + len(left.pending) == left.produced  # and nothing made was lost
