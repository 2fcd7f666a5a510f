"""Rate limiter admission rules (Reverb's SampleToInsertRatio, checked before each call)."""

import numpy as np
import pytest

from phylorl.replay.rate_limiter import RateLimiter


def test_min_size_only():
    limiter = RateLimiter(min_size_to_sample=3)
    assert not limiter.can_sample(2) and limiter.can_sample(3)
    assert limiter.can_insert(0) and limiter.can_insert(10**6)
    assert "holds 2 transitions, fewer than min_size_to_sample=3" in limiter.why_no_sample(2)


def test_samples_per_insert_sequence_hand_computed():
    # spi 2, min size 4: target diff = 8, bounds 8 -/+ 3 -> sample while diff > 5, insert while diff < 11
    limiter = RateLimiter(min_size_to_sample=4, samples_per_insert=2.0, error_buffer=3.0)
    size = 0
    for _ in range(4):  # filling up: inserts always pass, samples wait
        assert limiter.can_insert(size) and not limiter.can_sample(size)
        limiter.record_insert(1)
        size += 1
    assert limiter.diff == 8.0 and limiter.can_sample(size)
    limiter.record_insert(1)
    size += 1  # diff 10 < 11: one more insert allowed
    assert limiter.can_insert(size)
    limiter.record_insert(1)
    size += 1  # diff 12: inserts wait for samples
    assert limiter.diff == 12.0 and not limiter.can_insert(size)
    assert "balance 12 must stay below 11); about 2 more sampled" in limiter.why_no_insert(size)
    limiter.record_sample(6)  # diff 6 > 5: samples still allowed
    assert limiter.can_sample(size) and limiter.can_insert(size)
    limiter.record_sample(4)  # diff 2: samples wait for inserts
    assert not limiter.can_sample(size)
    assert "balance 2 must exceed 5); about 2 more inserted" in limiter.why_no_sample(size)


def test_insert_and_sample_are_never_both_refused():
    rng = np.random.default_rng(0)
    limiter = RateLimiter(min_size_to_sample=10, samples_per_insert=4.0, error_buffer=0.5)
    size = 0
    for _ in range(5000):
        can_insert, can_sample = limiter.can_insert(size), limiter.can_sample(size)
        assert can_insert or can_sample
        if can_sample and (not can_insert or rng.random() < 0.5):
            limiter.record_sample(int(rng.integers(1, 300)))
        else:
            n = int(rng.integers(1, 50))
            limiter.record_insert(n)
            size = min(size + n, 100)


def test_reset_for_a_restored_table():
    limiter = RateLimiter(min_size_to_sample=100, samples_per_insert=2.0, error_buffer=10.0)
    limiter.reset(size=5000)
    assert limiter.diff == 200.0 and limiter.can_sample(5000) and limiter.can_insert(5000)
    limiter.reset(size=30)
    assert limiter.diff == 60.0


def test_bad_settings():
    with pytest.raises(ValueError, match="min_size_to_sample must be >= 1"):
        RateLimiter(0)
    with pytest.raises(ValueError, match="error_buffer must be > 0"):
        RateLimiter(1, samples_per_insert=1.0, error_buffer=0.0)
    with pytest.raises(ValueError, match="samples_per_insert must be >= 0"):
        RateLimiter(1, samples_per_insert=-1.0)
