"""The learner's feed processes against a real replay service on a real Redis: the batches they hand over are
the ones the compiled pass makes of the records drawn, bit for bit; a feed process that fails or dies stops
the learner with the reason."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from phylorl.agent.packed_batch import collate_records
from phylorl.env.config import EnvConfig
from phylorl.agent.batch import on_device
from phylorl.nets.inputs import move_to
from phylorl.phylo.simulate import simulate_dataset
from phylorl.replay import RateLimiter
from phylorl.wire.codec import PackedRecords
from services.common.security import ServerCredentials
from services.learner.config import LearnerConfig
from services.learner.feed import FeedProcesses
from services.replay.buffer import PrioritizedReplay
from services.replay.client import ReplayClient
from services.replay.server import ReplayServer
from services.replay.store import RedisStore

sys.path.insert(0, str(Path(__file__).parents[2] / "unit" / "agent"))
from test_packed_batch import _assert_same, _episodes  # noqa: E402  (the unit tests' real episodes)


def _serve(redis_client, prefix: str, security=None) -> tuple[PrioritizedReplay, ReplayServer]:
    table = PrioritizedReplay(RedisStore(redis_client, prefix), capacity=200, alpha=0.6, beta=0.4,
                              rate_limiter=RateLimiter(8, 0.0), seed=1)
    server = ReplayServer(host="127.0.0.1", port=0, max_workers=8, max_message_bytes=64 << 20, default_timeout_s=5.0,
                          security=security)
    server.start()
    server.serve(table)
    return table, server


def _take(feed: FeedProcesses, deadline_s: float = 60.0):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        drawn = feed.take(timeout_s=0.2)
        if drawn is not None:
            return drawn
    raise AssertionError(f"no batch from the feed processes within {deadline_s} s")


@pytest.mark.parametrize("pinned", [False, pytest.param(True, marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="pinned host memory needs CUDA"))])
def test_feed_processes_hand_over_the_batches_of_the_records_drawn(redis_client, tmp_path, pinned):
    """On a GPU learner the batches come in pinned memory, ready for an asynchronous copy."""
    alignment = simulate_dataset(9, 200, np.random.default_rng(7)).alignment
    records = _episodes(alignment, EnvConfig(horizon=6, features="rich"), 40, seed=8, labels=True)
    table, server = _serve(redis_client, "test:feed")
    client = ReplayClient(f"127.0.0.1:{server.port}")
    client.insert_records(records, np.linspace(1.0, 3.0, len(records)))  # keys 0.. in order
    config = LearnerConfig(replay_address=f"127.0.0.1:{server.port}", batch_size=16, run_dir=str(tmp_path))
    try:
        with FeedProcesses(config, workers=2, slots=2, pinned=pinned) as feed:
            seen = set()
            for _ in range(8):  # more batches than buffers: each buffer is handed round and written again
                drawn = _take(feed)
                assert drawn.path == "compiled" and drawn.corrupt == 0 and drawn.keys.shape == (16,)
                assert (drawn.versions == drawn.keys - 1).all()  # _episodes: policy_version = step - 1
                batch = drawn.items.unpack()  # a Block: the batch's bytes in one host copy
                expected, _ = collate_records(PackedRecords.from_records([records[k] for k in drawn.keys]),
                                              weights=batch.weights.numpy(), compact=True)
                _assert_same(expected, batch)
                assert drawn.items.data.is_pinned() == pinned
                if pinned:  # to the GPU as one block, expanded there: the host batch's moves, bit for bit
                    _assert_same(on_device(expected, "cpu"), move_to(on_device(drawn.items, "cuda"), "cpu"))
                seen.update(drawn.keys.tolist())
            assert len(seen) > 16
    finally:
        client.close()
        server.stop(grace_s=1.0)


def test_a_feed_process_that_fails_or_dies_is_reported(redis_client, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    table, server = _serve(redis_client, "test:feed:fail", security=ServerCredentials(token_file=str(token)))
    try:
        refused = LearnerConfig(replay_address=f"127.0.0.1:{server.port}", batch_size=4, run_dir=str(tmp_path))
        with FeedProcesses(refused, workers=1, slots=1, pinned=False) as feed:  # no token: refused
            with pytest.raises(RuntimeError, match=r"(?s)feed process 0 failed.*UNAUTHENTICATED"):
                _take(feed)
        served = LearnerConfig(replay_address=f"127.0.0.1:{server.port}", batch_size=4, run_dir=str(tmp_path),
                               token_file=str(token))
        with FeedProcesses(served, workers=2, slots=1, pinned=False) as feed:  # nothing to draw yet: waiting
            assert feed.take(timeout_s=0.5) is None
            feed._processes[1].kill()
            feed._processes[1].join(10.0)
            with pytest.raises(RuntimeError, match=r"feed process 1 exited \(code -9\) without a word"):
                feed.take(timeout_s=0.1)
    finally:
        server.stop(grace_s=1.0)
