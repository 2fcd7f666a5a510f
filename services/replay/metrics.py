"""Prometheus metrics of the replay service (served by ``__main__`` on ``--metrics-port``).

``phylorl_replay_insert_seconds``              histogram  handling time of one Insert call, rate-limiter wait
                                                          included
``phylorl_replay_sample_seconds``              histogram  handling time of one Sample call, rate-limiter wait
                                                          included
``phylorl_replay_size``                        gauge      transitions held
``phylorl_replay_inserted_total``              counter    transitions inserted
``phylorl_replay_duplicates_total``            counter    records skipped as already stored (idempotent
                                                          resends)
``phylorl_replay_sampled_total``               counter    transitions handed out by Sample
``phylorl_replay_priority_updates_total``      counter    priorities updated (keys still held)
``phylorl_replay_rate_limited_seconds_total``  counter    time calls spent waiting for the rate limiter, by
                                                          call
``phylorl_replay_rejected_total``              counter    calls that failed, by call and gRPC status code
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from phylorl.telemetry import LATENCY_BUCKETS_S

INSERT_SECONDS = Histogram(
    "phylorl_replay_insert_seconds", "Handling time of one Insert call (s)", buckets=LATENCY_BUCKETS_S
)
SAMPLE_SECONDS = Histogram(
    "phylorl_replay_sample_seconds", "Handling time of one Sample call (s)", buckets=LATENCY_BUCKETS_S
)
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
