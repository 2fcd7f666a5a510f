"""Prometheus metrics of the learner and its inference endpoint (served on ``--metrics-port``; each is
described in ``docs/metrics.md``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from phylorl.telemetry import BATCH_SIZE_BUCKETS, LAG_BUCKETS
from services.common.observe import seconds_histogram

UPDATE_SECONDS = seconds_histogram("phylorl_learner_update_seconds", "One learner update (s)")
UPDATES = Counter("phylorl_learner_updates_total", "Learner updates")
GRAPH_REPLAYS = Counter(
    "phylorl_learner_graph_replays_total", "Learner updates replayed as captured CUDA graphs"
)
BATCH_WAIT_SECONDS = seconds_histogram("phylorl_learner_batch_wait_seconds", "Wait for a ready batch (s)")
WEIGHTS_VERSION = Gauge("phylorl_learner_weights_version", "Version of the online networks")
PUBLISH_SECONDS = seconds_histogram(
    "phylorl_learner_publish_seconds",
    "One publication of the weights to the inference endpoint, on the update loop (s)",
)
PUBLISHED_VERSION = Gauge("phylorl_learner_published_version", "Version last published to actors")
LOSS = Gauge("phylorl_learner_loss", "Last loss", ["name"])
Q_MEAN = Gauge("phylorl_learner_q_mean", "Mean Q(s,a) of the last batch")
ALPHA = Gauge("phylorl_learner_alpha", "Temperature alpha")
TD_ABS_MEAN = Gauge("phylorl_learner_td_abs_mean", "Mean |TD error| of the last batch")
ENTROPY = Gauge("phylorl_learner_entropy", "Mean policy entropy on next states (nats)")
POLICY_LAG = Histogram(
    "phylorl_learner_policy_lag_versions", "Learner version minus acting version", buckets=LAG_BUCKETS
)
CHECKPOINTS = Counter("phylorl_learner_checkpoints_total", "Checkpoints written")
CORRUPT_RECORDS = Counter(
    "phylorl_learner_corrupt_records_total",
    "Sampled replay records that did not decode (retired with priority 0)",
)
REDIS_FAILURES = Counter(
    "phylorl_learner_redis_failures_total",
    "Publications of the weights to Redis that failed (Redis away; the next one retries)",
)
SKIPPED_BATCHES = Counter(
    "phylorl_learner_skipped_batches_total", "Batches skipped because their loss or gradients were not finite"
)
INFERENCE_LATENCY = seconds_histogram("phylorl_inference_latency_seconds", "One Act request (s)")
INFERENCE_BATCH = Histogram(
    "phylorl_inference_batch_size", "Observations per network call", buckets=BATCH_SIZE_BUCKETS
)
INFERENCE_STAGE = seconds_histogram(
    "phylorl_inference_stage_seconds", "One stage of the inference endpoint's work (s)", ["stage"]
)
INFERENCE_QUEUE = Gauge("phylorl_inference_queue_depth", "Requests waiting for the network")
INFERENCE_REQUESTS = Counter("phylorl_inference_requests_total", "Act requests answered")
INFERENCE_REJECTED = Counter("phylorl_inference_rejected_total", "Act requests refused (overloaded)")
INFERENCE_BATCHES = Counter(
    "phylorl_inference_batches_total",
    "Network calls of the inference endpoint, by how they ran (graph: a replayed CUDA graph)",
    ["path"],
)
INFERENCE_CAPTURE_FAILURES = Counter(
    "phylorl_inference_capture_failures_total",
    "Batch shapes whose CUDA graph capture failed (answered eagerly since)",
)
