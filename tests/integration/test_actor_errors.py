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
from helpers import serve_replay

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
RICH = NetworkConfig(features="rich", hidden=16, action_hidden=16, head_hidden=16)


def jc_data(seed: int):
    """A simulated 6-taxon, 100-site JC alignment."""
    return simulate_dataset(6, 100, dataset_rng(seed, 0), model=parse_model("JC"))


def actor_config(endpoint: str, replay_port: int, rpc_timeout_s: float, **settings) -> ActorConfig:
    """An in-process actor's settings: ``endpoint``, the replay service at ``replay_port``, short backoff."""
    return ActorConfig(
        learner_address=endpoint,
        replay_address=f"127.0.0.1:{replay_port}",
        alignments="unused",
        metrics_port=0,
        backoff_max_s=0.2,
        rpc_timeout_s=rpc_timeout_s,
        **settings,
    )


def jc_envs(data, copies: int, horizon: int, seed: int = 0) -> VecTreeEnv:
    entry = EnvAlignment.build(data.alignment, prepare_alignment(data.alignment, "JC"), "sim")
    return VecTreeEnv([entry], copies, EnvConfig(horizon=horizon, features="rich"), seed=seed)


def actor_process(
    tmp_path, data, endpoint: str, replay_port: int, actor_id: str, rpc_timeout_s: float, *flags, stderr=None
):
    """``python -m services.actor`` on ``data`` (horizon 5, sends of 4, 8 held in memory, its spool in
    ``tmp_path/spool``), stdout discarded, stderr to ``stderr`` (discarded unless given)."""
    from phylorl.phylo.alignment import format_fasta

    fasta = tmp_path / "sim.fasta"
    fasta.write_text(format_fasta(data.alignment))
    fixed = ["--model", "JC", "--metrics-port", "0", "--env.horizon", "5"]
    fixed += ["--send-batch", "4", "--buffer-capacity", "8"]
    paths = ["--alignments", fasta, "--cache-dir", tmp_path / "cache", "--spool-dir", tmp_path / "spool"]
    addresses = ["--learner-address", endpoint, "--replay-address", f"127.0.0.1:{replay_port}"]
    limits = ["--rpc-timeout-s", str(rpc_timeout_s), "--actor-id", actor_id]
    return subprocess.Popen(
        [sys.executable, "-m", "services.actor", *fixed, *map(str, paths), *addresses, *limits, *flags],
        stdout=subprocess.DEVNULL,
        stderr=stderr or subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def test_a_non_transient_status_stops_the_actor_instead_of_retrying(inference_factory, free_port_factory):
    basic_endpoint = inference_factory(BASIC)
    envs = jc_envs(jc_data(3), 1, horizon=4)
    config = actor_config(basic_endpoint, free_port_factory(), 10.0)
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
    endpoint = inference_factory(RICH)
    envs = jc_envs(jc_data(4), 2, horizon=5)
    replay_port = free_port_factory()
    config = actor_config(
        endpoint,
        replay_port,
        2.0,
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
    table, server = serve_replay(redis_client, "test:outbox", port=replay_port)
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
    from replay_audit import read_table

    from services.actor.outbox import read_journal

    endpoint = inference_factory(RICH)
    data = jc_data(5)
    spool, replay_port = tmp_path / "spool", free_port_factory()
    first = actor_process(tmp_path, data, endpoint, replay_port, "doomed", 2, "--backoff-max-s", "0.2")
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

    table, server = serve_replay(redis_client, "test:recover", port=replay_port)
    envs = jc_envs(data, 1, horizon=5, seed=1)
    limits = {"send_batch": 4, "buffer_capacity": 8, "max_steps": 10, "actor_id": "successor"}
    config = actor_config(endpoint, replay_port, 2.0, spool_dir=str(spool), **limits)
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
    from phylorl.replay import RateLimiter
    from services.actor.outbox import read_journal

    endpoint = inference_factory(RICH)
    spool, replay_port = tmp_path / "spool", free_port_factory()
    # inserts admitted until 4 + 4 are held with nothing sampled; then each waits
    table, server = serve_replay(
        redis_client, "test:held", port=replay_port, limiter=RateLimiter(4, 1.0, 4.0)
    )
    actor = actor_process(tmp_path, jc_data(6), endpoint, replay_port, "held", 300, stderr=subprocess.PIPE)
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
