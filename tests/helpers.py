"""Small builders and checks the tests share: records of the real environment's episodes, a learner batch made
as the learner makes it (from records), and bit-for-bit comparison of nested dataclasses of tensors."""

from __future__ import annotations

import dataclasses

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
