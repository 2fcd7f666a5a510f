"""Prometheus helpers shared by the services' metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from prometheus_client import Histogram

from phylorl.telemetry import LATENCY_BUCKETS_S


def seconds_histogram(name: str, documentation: str, labels: Sequence[str] = ()) -> Histogram:
    """A histogram of durations (s) on the shared latency buckets."""
    return Histogram(name, documentation, labels, buckets=LATENCY_BUCKETS_S)


def observe_many(histogram: Histogram, values: np.ndarray) -> None:
    """What ``histogram.observe(v)`` for each ``v`` of ``values`` records, in one increment per bucket that
    gets any and one of the sum: a learner observes each batch's 128 policy lags, and each ``observe`` is a
    few microseconds under the interpreter lock. It writes the histogram's values as ``observe`` does
    (``tests/unit/common/test_observe.py`` holds it to that)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        return
    bounds = np.asarray(histogram._upper_bounds, dtype=np.float64)
    counts = np.bincount(np.searchsorted(bounds, values, side="left"), minlength=bounds.size + 1)
    histogram._sum.inc(float(values.sum()))
    for i in np.flatnonzero(counts[: bounds.size]):  # (index bounds.size: above +Inf, i.e. NaN, in no bucket)
        histogram._buckets[i].inc(int(counts[i]))
