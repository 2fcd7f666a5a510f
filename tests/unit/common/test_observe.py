"""``observe_many`` records what one ``observe`` per value records."""

from __future__ import annotations

import math

import numpy as np
from prometheus_client import CollectorRegistry, Histogram

from phylorl.telemetry import LAG_BUCKETS, LATENCY_BUCKETS_S
from services.common.observe import observe_many


def _samples(histogram: Histogram) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for metric in histogram.collect()
        for s in metric.samples
        if not s.name.endswith("_created")
    }


def test_observe_many_records_what_observing_each_value_records():
    rng = np.random.default_rng(0)
    for buckets, values in (
        (LAG_BUCKETS, np.concatenate([rng.integers(-3, 6000, 500), np.array(LAG_BUCKETS[:-1]), [0, 0, 5]])),
        (LATENCY_BUCKETS_S, np.concatenate([rng.exponential(0.01, 300), [5e-5, 30.0, 31.0, 0.0]])),
        (LAG_BUCKETS, np.array([], dtype=np.int64)),
    ):
        one, many = (Histogram("h", "h", buckets=buckets, registry=CollectorRegistry()) for _ in range(2))
        for value in values:
            one.observe(float(value))
        observe_many(many, values[: len(values) // 2])
        observe_many(many, values[len(values) // 2 :])
        expected, got = _samples(one), _samples(many)
        assert expected.keys() == got.keys()
        for key in expected:
            assert math.isclose(got[key], expected[key], rel_tol=1e-12, abs_tol=1e-9), key
