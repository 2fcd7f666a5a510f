"""MemoryReplay: proportional sampling, importance weights, FIFO eviction, priority updates."""

import numpy as np
import pytest
from memory_replay import MemoryReplay
from scipy import stats


def transitions(n, start=0):
    """Distinct records (each names its number; the table does not read them)."""
    return [b"record %d" % (start + i) for i in range(n)]


def numbers(records) -> list[float]:
    return [float(bytes(r).split()[1]) for r in records]


def test_sampling_frequencies_follow_priority_power_alpha():
    replay = MemoryReplay(capacity=8, alpha=0.5, beta=0.4, seed=1)
    priorities = np.array([1.0, 4.0, 9.0, 16.0, 0.25, 2.25])
    replay.insert(transitions(6), priorities)
    draws = 20_000
    counts = np.zeros(6)
    for _ in range(draws // 50):
        batch, _, keys = replay.sample(50)
        assert numbers(batch) == keys.tolist()  # each key names its own transition
        counts += np.bincount(keys, minlength=6)
    expected = priorities**0.5 / (priorities**0.5).sum() * draws  # 1,2,3,4,0.5,1.5 out of 12
    chi2 = stats.chisquare(counts, expected)
    assert chi2.pvalue > 0.001, (counts, expected)


def test_importance_weights_are_n_p_to_minus_beta_over_the_batch_max():
    replay = MemoryReplay(capacity=4, alpha=1.0, beta=0.5, seed=0)
    replay.insert(transitions(4), [1.0, 1.0, 2.0, 4.0])
    _, weights, keys = replay.sample(64)
    p = np.array([1.0, 1.0, 2.0, 4.0]) / 8.0
    raw = (4 * p[keys]) ** -0.5
    np.testing.assert_allclose(weights, raw / raw.max(), rtol=1e-6)
    assert weights.dtype == np.float32
    # the stratified batch of 64 holds every key, so the max weight is that of priority 1: w(4) = 0.5
    assert set(keys.tolist()) == {0, 1, 2, 3}
    np.testing.assert_allclose(weights[keys == 3], 0.5, rtol=1e-6)


def test_fifo_eviction_and_default_priority():
    replay = MemoryReplay(capacity=3, alpha=1.0, beta=0.0, seed=0)
    assert replay.insert(transitions(2), [5.0, 1.0]).tolist() == [0, 1]
    assert replay.max_priority == 5.0
    keys = replay.insert(transitions(2, start=2))  # default priority: the largest seen (5)
    assert keys.tolist() == [2, 3] and len(replay) == 3
    batch, weights, keys = replay.sample(300)
    assert set(keys.tolist()) == {1, 2, 3}  # key 0 was evicted
    assert set(numbers(batch)) == {1.0, 2.0, 3.0}
    np.testing.assert_array_equal(weights, 1.0)  # beta = 0
    counts = np.bincount(keys, minlength=4)
    # stratified: near exact
    np.testing.assert_allclose(counts[1:] / 300, [1 / 11, 5 / 11, 5 / 11], atol=0.01)


def test_update_priorities_skips_evicted_keys_and_last_repeat_wins():
    replay = MemoryReplay(capacity=2, alpha=1.0, beta=0.0, seed=0)
    replay.insert(transitions(2), [1.0, 1.0])
    replay.insert(transitions(1, start=2), [1.0])  # evicts key 0; key 2 reuses its slot
    assert replay.update_priorities([0, 1, 2, 2], [100.0, 3.0, 7.0, 1.0]) == 2  # key 0 is gone
    _, _, keys = replay.sample(400)
    counts = np.bincount(keys, minlength=3)
    assert counts[0] == 0
    np.testing.assert_allclose(counts[1:] / 400, [0.75, 0.25], atol=0.01)


def test_zero_priorities_are_never_sampled_and_all_zero_is_an_error():
    replay = MemoryReplay(capacity=4, alpha=0.6, beta=0.4, seed=0)
    replay.insert(transitions(3), [0.0, 2.0, 0.0])
    _, _, keys = replay.sample(32)
    assert set(keys.tolist()) == {1}
    replay.update_priorities([1], [0.0])
    with pytest.raises(ValueError, match="priority 0"):
        replay.sample(4)


def test_bad_input_is_rejected_with_clear_messages():
    with pytest.raises(ValueError, match="capacity"):
        MemoryReplay(0)
    replay = MemoryReplay(capacity=2)
    with pytest.raises(ValueError, match="empty replay"):
        replay.sample(1)
    with pytest.raises(ValueError, match="1..capacity=2"):
        replay.insert(transitions(3))
    with pytest.raises(ValueError, match="finite and >= 0"):
        replay.insert(transitions(1), [-1.0])
    with pytest.raises(ValueError, match="expected 2 priorities"):
        replay.insert(transitions(2), [1.0])
