"""Telemetry definitions shared by the services: histogram buckets and metric naming rules.

Metric names carry their unit (``_seconds``, ``_bytes``, ``_total`` for counters); every metric is
listed with its meaning in ``docs/metrics.md``. The services own their metric objects
(``services/<name>/metrics.py``); this module holds what they share.
"""

# 50 µs .. 30 s: sub-millisecond resolution for updates and inference, seconds for slow waits.
LATENCY_BUCKETS_S = (
    5e-5,
    1e-4,
    2.5e-4,
    5e-4,
    1e-3,
    2.5e-3,
    5e-3,
    1e-2,
    2.5e-2,
    5e-2,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
# log-likelihood gained over an episode (log units; negative when an episode lost likelihood)
DELTA_LOGLIK_BUCKETS = (
    -100.0,
    -10.0,
    -1.0,
    0.0,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
)
# inference batch sizes (observations per network call)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# weights versions between acting and learning
LAG_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
