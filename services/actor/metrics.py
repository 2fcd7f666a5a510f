"""Prometheus metrics of an actor process (served by ``__main__`` on ``--metrics-port``).

``phylorl_actor_env_step_seconds``          histogram  one environment step (SPR + local branch optimisation +
                                                       observation)
``phylorl_actor_env_reset_seconds``         histogram  one episode start (start tree + full branch
                                                       optimisation)
``phylorl_actor_inference_call_seconds``    histogram  one batched Act call to the learner, retries excluded
``phylorl_actor_inference_wait_seconds_total`` counter  time the loop stood waiting for an Act answer (s):
                                                        with a pipeline of 2+, calls overlap with stepping
                                                        other groups
``phylorl_actor_env_steps_total``           counter    environment steps
``phylorl_actor_episodes_total``            counter    finished episodes
``phylorl_actor_episode_delta_loglik``      histogram  log-likelihood gained over an episode (last - start)
``phylorl_actor_episode_delta_loglik_cumulative`` gauge  sum of those gains (the histogram has negative
                                                         buckets, so prometheus_client exports no ``_sum``)
``phylorl_actor_transitions_sent_total``    counter    transitions accepted by the replay service
``phylorl_actor_transitions_dropped_total`` counter    transitions dropped: memory full without a spool, or
                                                       the spool full
``phylorl_actor_buffer_size``               gauge      transitions waiting in memory to be sent
``phylorl_actor_spooled``                   gauge      transitions waiting only in the journal (beyond memory)
                                                       to be sent
``phylorl_actor_recovered_transitions_total`` counter  transitions of dead actors' journals sent at start
``phylorl_actor_transitions_produced_total`` counter   transitions made (each stored by replay once, or
                                                       counted dropped)
``phylorl_actor_weights_version``           gauge      weights version of the last inference answer
``phylorl_actor_reconnects_total``          counter    failed calls retried after a backoff, by service
``phylorl_actor_labelled_states_total``     counter    states whose every move was scored as demonstration
                                                       labels
``phylorl_actor_label_seconds_total``       counter    time spent scoring those moves (s)
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from phylorl.telemetry import DELTA_LOGLIK_BUCKETS, LATENCY_BUCKETS_S

ENV_STEP_SECONDS = Histogram(
    "phylorl_actor_env_step_seconds", "One environment step (s)", buckets=LATENCY_BUCKETS_S
)
ENV_RESET_SECONDS = Histogram(
    "phylorl_actor_env_reset_seconds", "One episode start (s)", buckets=LATENCY_BUCKETS_S
)
INFERENCE_CALL_SECONDS = Histogram(
    "phylorl_actor_inference_call_seconds", "One batched Act call (s)", buckets=LATENCY_BUCKETS_S
)
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
