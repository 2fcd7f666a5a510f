"""Prometheus metrics of the replay service, served on ``--metrics-port`` (see ``docs/metrics.md``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from services.common.observe import seconds_histogram

INSERT_SECONDS = seconds_histogram("phylorl_replay_insert_seconds", "Handling time of one Insert call (s)")
SAMPLE_SECONDS = seconds_histogram("phylorl_replay_sample_seconds", "Handling time of one Sample call (s)")
SIZE = Gauge("phylorl_replay_size", "Transitions held by the replay table")
INSERTED = Counter("phylorl_replay_inserted_total", "Transitions inserted")
DUPLICATES = Counter(
    "phylorl_replay_duplicates_total", "Records skipped as already stored (idempotent resends)"
)
SAMPLED = Counter("phylorl_replay_sampled_total", "Transitions handed out by Sample")
PRIORITY_UPDATES = Counter("phylorl_replay_priority_updates_total", "Priorities updated for keys still held")
RATE_LIMITED_SECONDS = Counter(
    "phylorl_replay_rate_limited_seconds_total", "Time calls spent waiting for the rate limiter (s)", ["call"]
)
REJECTED = Counter("phylorl_replay_rejected_total", "Calls that failed", ["call", "code"])
