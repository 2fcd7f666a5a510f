"""Prometheus metrics of the learner and its inference endpoint (served on ``--metrics-port``).

``phylorl_learner_update_seconds``        histogram  one learner update (forward, backward, optimiser,
                                                     targets; on a GPU until its metrics are back: the
                                                     optimiser's and the targets' kernels then run on, and the
                                                     next update waits for them)
``phylorl_learner_updates_total``         counter    updates done by this process
``phylorl_learner_batch_wait_seconds``    histogram  time the update loop waited for a ready batch
``phylorl_learner_weights_version``       gauge      version of the online networks (one per update)
``phylorl_learner_published_version``     gauge      version last published to actors (inference + Redis)
``phylorl_learner_loss``                  gauge      last loss, by name (q1, q2, alpha)
``phylorl_learner_q_mean``                gauge      mean Q(s, a) of the last batch
``phylorl_learner_alpha``                 gauge      temperature alpha
``phylorl_learner_td_abs_mean``           gauge      mean |TD error| of the last batch
``phylorl_learner_entropy``               gauge      mean policy entropy on the last batch's next states
                                                     (nats)
``phylorl_learner_policy_lag_versions``   histogram  learner version minus the version that chose the action
``phylorl_learner_checkpoints_total``     counter    checkpoints written
``phylorl_learner_skipped_batches_total`` counter   batches skipped: loss or gradients not finite
``phylorl_learner_corrupt_records_total`` counter  sampled records that did not decode (priority set to 0)
``phylorl_learner_redis_failures_total``  counter    publications to Redis that failed (Redis away; the next
                                                     one retries)
``phylorl_inference_latency_seconds``     histogram  one Act request, from arrival to answer
``phylorl_inference_batch_size``          histogram  observations per network call
``phylorl_inference_stage_seconds``       histogram  one stage of the endpoint's work, by stage: ``inputs`` (a
                                                     request's network inputs, on its gRPC thread), ``batch``
                                                     (a batch's inputs assembled and copied to the device),
                                                     ``network`` (the networks and the answers' copy back),
                                                     ``reply`` (answers sliced, callers woken)
``phylorl_inference_batches_total``       counter    network calls, by path: ``graph`` (replayed) or ``eager``
``phylorl_inference_capture_failures_total`` counter shapes whose CUDA graph capture failed (eager since)
``phylorl_inference_queue_depth``         gauge      requests waiting for the network
``phylorl_inference_requests_total``      counter    Act requests answered
``phylorl_inference_rejected_total``      counter    Act requests refused (queue full: RESOURCE_EXHAUSTED)
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from phylorl.telemetry import BATCH_SIZE_BUCKETS, LAG_BUCKETS, LATENCY_BUCKETS_S

UPDATE_SECONDS = Histogram(
    "phylorl_learner_update_seconds", "One learner update (s)", buckets=LATENCY_BUCKETS_S
)
UPDATES = Counter("phylorl_learner_updates_total", "Learner updates")
GRAPH_REPLAYS = Counter(
    "phylorl_learner_graph_replays_total", "Learner updates replayed as captured CUDA graphs"
)
BATCH_WAIT_SECONDS = Histogram(
    "phylorl_learner_batch_wait_seconds", "Wait for a ready batch (s)", buckets=LATENCY_BUCKETS_S
)
WEIGHTS_VERSION = Gauge("phylorl_learner_weights_version", "Version of the online networks")
PUBLISH_SECONDS = Histogram(
    "phylorl_learner_publish_seconds",
    "One publication of the weights to the inference endpoint, on the update loop (s)",
    buckets=LATENCY_BUCKETS_S,
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
INFERENCE_LATENCY = Histogram(
    "phylorl_inference_latency_seconds", "One Act request (s)", buckets=LATENCY_BUCKETS_S
)
INFERENCE_BATCH = Histogram(
    "phylorl_inference_batch_size", "Observations per network call", buckets=BATCH_SIZE_BUCKETS
)
INFERENCE_STAGE = Histogram(
    "phylorl_inference_stage_seconds",
    "One stage of the inference endpoint's work (s)",
    ["stage"],
    buckets=LATENCY_BUCKETS_S,
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
