"""Small builders and checks the tests share: records of the real environment's episodes, a learner batch made
as the learner makes it (from records), and bit-for-bit comparison of nested dataclasses of tensors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import torch

from phylorl.agent.transfer import on_device
from phylorl.env.config import EnvConfig
from phylorl.env.prepare import prepare_alignment
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.nets.inputs import Batch
from phylorl.records.codec import encode_transition
from phylorl.records.collate import collate_records
from phylorl.records.format import PackedRecords
from phylorl.types import Observation, Transition


def phylorl_argv(words: str, *args) -> list[str]:
    """``python -m phylorl.cli`` with ``words`` split at spaces, then ``args`` each whole (paths)."""
    return [sys.executable, "-m", "phylorl.cli", *words.split(), *map(str, args)]


def phylorl_cli(*args, timeout: float = 600, **run) -> subprocess.CompletedProcess:
    """``python -m phylorl.cli *args`` run to its end (``timeout``: a hang guard), output captured as text;
    ``run``: more of :func:`subprocess.run`'s arguments (``env``, ``cwd``)."""
    return subprocess.run(phylorl_argv("", *args), capture_output=True, text=True, timeout=timeout, **run)


def serve_replay(
    redis_client,
    prefix: str,
    *,
    port: int = 0,
    capacity: int = 10_000,
    limiter=None,
    seed: int | None = None,
    max_workers: int = 4,
    max_message_bytes: int = 64 << 20,
    timeout_s: float = 5.0,
    security=None,
):
    """A real replay service on loopback ``port`` (0: any free one) over keys ``prefix`` of ``redis_client``,
    started and serving: ``(table, server)``. ``limiter``: its rate limiter (a minimum size of 1 and no ratio
    unless given)."""
    from phylorl.replay import RateLimiter
    from services.replay.buffer import PrioritizedReplay
    from services.replay.server import ReplayServer
    from services.replay.store import RedisStore

    table = PrioritizedReplay(
        RedisStore(redis_client, prefix),
        capacity=capacity,
        alpha=0.6,
        beta=0.4,
        rate_limiter=limiter or RateLimiter(1, 0.0),
        seed=seed,
    )
    server = ReplayServer(
        host="127.0.0.1",
        port=port,
        max_workers=max_workers,
        max_message_bytes=max_message_bytes,
        default_timeout_s=timeout_s,
        security=security,
    )
    server.start()
    server.serve(table)
    return table, server


def batch_of(
    transitions, weights: np.ndarray | None = None, device: str = "cpu", compact: bool = False
) -> Batch:
    """The learner's batch of ``transitions`` (their records collated; the next moves expanded unless
    ``compact``)."""
    batch, _ = collate_records(
        PackedRecords.from_records([encode_transition(t) for t in transitions]), weights
    )
    return batch if compact else on_device(batch, device)


def episodes(alignment, config: EnvConfig, steps: int, seed: int, labels: bool = False) -> list[bytes]:
    """Records of a random walk of the real environment (resets at the horizon), as an actor makes them."""
    env = TreeEnv(
        [EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "a")], config, seed=seed
    )
    rng = np.random.default_rng(seed)
    obs, _ = env.reset()
    records = []
    for i in range(steps):
        action = int(rng.integers(obs.n_actions))
        nxt, reward, terminal, truncated, _ = env.step(action)
        next_labels = rng.normal(size=nxt.n_actions).astype(np.float32) if labels and i % 3 == 0 else None
        discount = 0.0 if i % 7 == 3 else 0.99 ** (1 + i % 3)
        records.append(
            encode_transition(
                Transition(
                    obs,
                    action,
                    reward,
                    nxt,
                    bool(i % 11 == 5),
                    truncated,
                    discount,
                    policy_version=i - 1,
                    next_labels=next_labels,
                )
            )
        )
        obs = env.reset()[0] if truncated else nxt
    return records


def assert_same(a, b, where: str = "batch") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape, (
            f"{where}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"
        )
        assert a.numpy().tobytes() == b.numpy().tobytes(), f"{where} differs"
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_same_observation(a: Observation, b: Observation) -> None:
    for name in ("neighbors", "edges", "lengths", "moves"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert (a.n_leaves, a.radius, a.dedupe, a.features) == (b.n_leaves, b.radius, b.dedupe, b.features)
    if a.rich is not None:
        for name in ("deltas", "support"):
            assert getattr(a.rich, name).tobytes() == getattr(b.rich, name).tobytes(), name
        assert a.rich.parsimony_length == b.rich.parsimony_length


def assert_same_transition(a: Transition, b: Transition) -> None:
    assert_same_observation(a.obs, b.obs)
    assert_same_observation(a.next_obs, b.next_obs)
    assert (a.action, a.reward, a.terminal, a.truncated, a.discount, a.policy_version) == (
        b.action,
        b.reward,
        b.terminal,
        b.truncated,
        b.discount,
        b.policy_version,
    )
