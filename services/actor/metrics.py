"""Prometheus metrics of an actor process, served on ``--metrics-port`` (see ``docs/metrics.md``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from phylorl.telemetry import DELTA_LOGLIK_BUCKETS
from services.common.observe import seconds_histogram

ENV_STEP_SECONDS = seconds_histogram("phylorl_actor_env_step_seconds", "One environment step (s)")
ENV_RESET_SECONDS = seconds_histogram("phylorl_actor_env_reset_seconds", "One episode start (s)")
INFERENCE_CALL_SECONDS = seconds_histogram("phylorl_actor_inference_call_seconds", "One batched Act call (s)")
INFERENCE_WAIT_SECONDS = Counter(
    "phylorl_actor_inference_wait_seconds_total",
    "Time the actor loop stood waiting for an inference answer (s)",
)
ENV_STEPS = Counter("phylorl_actor_env_steps_total", "Environment steps")
EPISODES = Counter("phylorl_actor_episodes_total", "Finished episodes")
EPISODE_DELTA_LOGLIK = Histogram(
    "phylorl_actor_episode_delta_loglik",
    "Log-likelihood gained over an episode",
    buckets=DELTA_LOGLIK_BUCKETS,
)
EPISODE_DELTA_CUMULATIVE = Gauge(
    "phylorl_actor_episode_delta_loglik_cumulative", "Sum of the log-likelihood gained over finished episodes"
)
TRANSITIONS_SENT = Counter(
    "phylorl_actor_transitions_sent_total", "Transitions accepted by the replay service"
)
TRANSITIONS_DROPPED = Counter(
    "phylorl_actor_transitions_dropped_total", "Transitions dropped (local buffer full)"
)
BUFFER_SIZE = Gauge("phylorl_actor_buffer_size", "Transitions waiting in memory to be sent")
SPOOLED = Gauge("phylorl_actor_spooled", "Transitions waiting only in the journal (beyond memory) to be sent")
RECOVERED = Counter(
    "phylorl_actor_recovered_transitions_total",
    "Transitions of dead actors' journals sent to the replay service at start",
)
TRANSITIONS_PRODUCED = Counter("phylorl_actor_transitions_produced_total", "Transitions made by this actor")
WEIGHTS_VERSION = Gauge("phylorl_actor_weights_version", "Weights version of the last inference answer")
RECONNECTS = Counter("phylorl_actor_reconnects_total", "Failed calls retried after a backoff", ["service"])
LABELLED_STATES = Counter("phylorl_actor_labelled_states_total", "States labelled as demonstrations")
LABEL_SECONDS = Counter("phylorl_actor_label_seconds_total", "Time spent labelling demonstration states (s)")
