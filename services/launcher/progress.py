"""Read the services' own Prometheus endpoints and turn them into run statistics."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

_LAST: dict[int, dict[str, float]] = {}


def scrape(port: int, timeout_s: float = 2.0) -> dict[str, float]:
    """``{sample name (with labels): value}`` from ``http://127.0.0.1:port/metrics``.

    When the endpoint does not answer (a busy or stopping process) the last values read from it are
    returned, so totals summed over services never step backwards.
    """
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as reply:
            text = reply.read().decode()
    except OSError:
        return _LAST.get(port, {})
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "le")
            if "le" in sample.labels:
                continue  # bucket lines are not needed here
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    _LAST[port] = out
    return out


@dataclass
class Snapshot:
    """Cumulative totals over all services at one moment."""

    time_s: float
    updates: float = 0.0
    update_seconds_sum: float = 0.0
    weights_version: float = 0.0
    env_steps: float = 0.0
    episodes: float = 0.0
    episode_delta_sum: float = 0.0
    replay_size: float = 0.0
    replay_inserted: float = 0.0
    inference_requests: float = 0.0
    actor_weights_version: float = -1.0
    actor_inference_wait_s: float = 0.0
    actors: int = 0
    alpha: float = float("nan")
    q_mean: float = float("nan")
    loss_q1: float = float("nan")


def snapshot(time_s: float, learner_port: int, replay_port: int, actor_ports: list[int]) -> Snapshot:
    s = Snapshot(time_s)
    learner = scrape(learner_port)
    s.updates = learner.get("phylorl_learner_updates_total", 0.0)
    s.update_seconds_sum = learner.get("phylorl_learner_update_seconds_sum", 0.0)
    s.weights_version = learner.get("phylorl_learner_weights_version", 0.0)
    s.inference_requests = learner.get("phylorl_inference_requests_total", 0.0)
    s.alpha = learner.get("phylorl_learner_alpha", float("nan"))
    s.q_mean = learner.get("phylorl_learner_q_mean", float("nan"))
    s.loss_q1 = learner.get("phylorl_learner_loss{name=q1}", float("nan"))
    replay = scrape(replay_port)
    s.replay_size = replay.get("phylorl_replay_size", 0.0)
    s.replay_inserted = replay.get("phylorl_replay_inserted_total", 0.0)
    for port in actor_ports:
        actor = scrape(port)
        s.env_steps += actor.get("phylorl_actor_env_steps_total", 0.0)
        s.episodes += actor.get("phylorl_actor_episodes_total", 0.0)
        s.episode_delta_sum += actor.get("phylorl_actor_episode_delta_loglik_cumulative", 0.0)
        s.actor_weights_version = max(
            s.actor_weights_version, actor.get("phylorl_actor_weights_version", -1.0)
        )
        s.actor_inference_wait_s += actor.get("phylorl_actor_inference_wait_seconds_total", 0.0)
    s.actors = len(actor_ports)
    return s


def rates(previous: Snapshot, current: Snapshot) -> dict[str, float]:
    """Per-second rates and windowed means between two snapshots."""
    dt = max(current.time_s - previous.time_s, 1e-9)
    updates = current.updates - previous.updates

    def change(name: str) -> float:
        return getattr(current, name) - getattr(previous, name)

    def mean(total: float, count: float) -> float:  # nan over none
        return total / count if count else float("nan")

    return {
        "updates_per_s": updates / dt,
        "env_steps_per_s": change("env_steps") / dt,
        "mean_update_ms": mean(1e3 * change("update_seconds_sum"), updates),
        "mean_episode_delta_loglik": mean(change("episode_delta_sum"), change("episodes")),
        # of the actors' time, the share their loops stood waiting for an inference answer (1:
        # inference-bound); a wait counts when it ends, so a window after a long one (the learner starting)
        # can show more than 1
        "actor_inference_wait_fraction": mean(change("actor_inference_wait_s") / dt, current.actors),
    }
