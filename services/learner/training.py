"""The learner's training loop: replay → prefetch → update → priorities, weights and checkpoints.

Batches are sampled and collated on the prefetch threads (:mod:`services.learner.sampling`); new priorities go
back to replay from a separate thread. Every ``publish_every`` updates the online networks are published to
the inference endpoint and their version to Redis (``<weights_key>:version``, which a restarted learner reads
so that versions never go back); checkpoints are written every ``checkpoint_every`` updates or
``checkpoint_seconds`` seconds and at exit.
"""

from __future__ import annotations

import csv
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import redis

from phylorl.agent.checkpoints import LATEST, latest_checkpoint
from phylorl.agent.learner import Learner
from phylorl.agent.prefetch import Prefetcher
from phylorl.interfaces import ReplaySource, WeightsSink
from services.common.observe import observe_many

from . import metrics
from .config import LearnerConfig
from .sampling import draw

log = logging.getLogger("phylorl.learner")
PREFETCH_DEPTH = 2
"""Batches collated ahead of the update (one being made, one waiting, on a CPU or a GPU alike)."""
LOGGED_VALUES = {
    "loss_q1": "loss/q1",
    "loss_q2": "loss/q2",
    "loss_alpha": "loss/alpha",
    "alpha": "alpha",
    "q_mean": "q/mean",
    "td_abs_mean": "td/abs_mean",
    "entropy": "entropy/mean",
    "loss_demo": "loss/demo",
}
"""The columns of ``updates.csv`` after its first four, each with the update's value it holds."""
UPDATE_COLUMNS = ("version", "time_s", "update_seconds", "batch_wait_seconds", *LOGGED_VALUES)


class Checkpoints:
    """``run_dir/checkpoints/learner-<version>.pt`` plus a ``latest`` file naming the newest."""

    def __init__(self, run_dir: str | os.PathLike, keep: int):
        self.directory = Path(run_dir) / "checkpoints"
        self.keep = keep

    def latest(self) -> Path | None:
        try:
            return latest_checkpoint(self.directory)
        except FileNotFoundError:  # a pointer to a deleted file: start afresh, as without one
            return None

    def save(self, learner: Learner) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"learner-{learner.weights_version:09d}.pt"
        learner.save(path)
        tmp = self.directory / f"{LATEST}.tmp"
        tmp.write_text(path.name)
        os.replace(tmp, self.directory / LATEST)
        for old in sorted(self.directory.glob("learner-*.pt"))[: -self.keep]:
            old.unlink()
        metrics.CHECKPOINTS.inc()
        return path


def continue_published_version(learner: Learner, redis_client, weights_key: str) -> None:
    """After a restart from a checkpoint older than the last weights published (``<weights_key>:version``
    in Redis), go on from the version after the published one, so that versions never go back."""
    published = redis_client.get(f"{weights_key}:version")
    if published is not None and int(published) >= learner.weights_version:
        version, what = int(published), "weights version %d was published before this start; going on from %d"
        log.info(f"{what}, not %d (versions never go back)", version, version + 1, learner.weights_version)
        learner.weights_version = version + 1


@dataclass(eq=False)
class TrainingLoop:
    """Updates from ``replay`` until ``config.updates`` or ``stop``; publishes to ``inference`` (and the
    version to ``redis_client`` when given), sends priorities back, checkpoints."""

    config: LearnerConfig
    learner: Learner
    replay: ReplaySource
    inference: WeightsSink
    redis_client: redis.Redis | None
    checkpoints: Checkpoints
    stop: threading.Event

    def __post_init__(self):
        self._priorities: queue.Queue = queue.Queue(maxsize=64)
        self._priority_thread = threading.Thread(target=self._send_priorities, name="priorities", daemon=True)
        self.updates_done = 0

    def publish(self) -> None:
        started = time.perf_counter()
        learner = self.learner
        # the live parameters: the endpoint copies them into its networks on the learner's device, queued
        # before the next update (a GPU learner never waits on a transfer to the host)
        snapshot = self.inference.publish(
            learner.policy_tensors(), learner.policy_alpha(), learner.weights_version
        )
        if self.redis_client is not None:
            try:
                self.redis_client.set(f"{self.config.weights_key}:version", snapshot.version)
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
                # Redis away (restarting): the actors already have these weights from the inference endpoint;
                # the next publication writes the version again
                metrics.REDIS_FAILURES.inc()
                what = "weights version %d not written to Redis (%s); the next publication retries"
                log.warning(what, snapshot.version, exc)
        metrics.PUBLISHED_VERSION.set(snapshot.version)
        metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)

    def _sample(self):
        drawn = draw(self.replay, self.config.batch_size, self.config.sample_timeout_s, self._retire)
        if drawn is None:
            return None
        metrics.CORRUPT_RECORDS.inc(drawn.corrupt)
        if drawn.batch is None:  # every record drawn was corrupt (and is retired)
            return None
        observe_many(metrics.POLICY_LAG, self.learner.weights_version - drawn.versions[drawn.versions >= 0])
        return drawn.batch, drawn.keys

    def _retire(self, keys: np.ndarray) -> None:
        try:
            self._priorities.put_nowait((keys, np.zeros(keys.size)))  # never drawn again
        except queue.Full:
            log.warning("priority queue full: %d corrupt records stay drawable for now", keys.size)

    def _send_priorities(self) -> None:
        while not (self.stop.is_set() and self._priorities.empty()):
            try:
                keys, priorities = self._priorities.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.replay.update_priorities(keys, priorities)
            except grpc.RpcError as exc:  # replay restarting: these priorities are lost, sampling goes on
                log.warning("priority update failed (%s)", exc.code().name)

    def run(self) -> None:
        cfg = self.config
        snapshot = self.inference.snapshot
        # main publishes before serving
        if snapshot is None or snapshot.version != self.learner.weights_version:
            self.publish()
        self._priority_thread.start()
        log_path = Path(cfg.run_dir) / "learner" / "updates.csv"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        new_file = not log_path.exists()
        started = last_checkpoint = time.monotonic()
        with (
            open(log_path, "a", newline="") as fh,
            Prefetcher(
                self._sample, self.learner.device, depth=PREFETCH_DEPTH, workers=cfg.prefetch_workers
            ) as prefetcher,
        ):
            writer = csv.writer(fh)
            if new_file:
                writer.writerow(UPDATE_COLUMNS)
            while not self.stop.is_set():
                if cfg.updates and self.learner.updates >= cfg.updates:
                    log.info("reached %d updates", cfg.updates)
                    break
                waited = time.perf_counter()
                try:
                    batch, keys = prefetcher.get(timeout=0.5)
                except TimeoutError:
                    continue
                waited = time.perf_counter() - waited
                metrics.BATCH_WAIT_SECONDS.observe(waited)
                t0 = time.perf_counter()
                replays = self.learner.graphs.replays if self.learner.graphs is not None else 0
                values, priorities = self.learner.step(batch)
                elapsed = time.perf_counter() - t0
                if self.learner.graphs is not None:
                    metrics.GRAPH_REPLAYS.inc(self.learner.graphs.replays - replays)
                if not self._finished(values, priorities, keys, waited, elapsed, writer, started):
                    continue  # nothing changed: nothing to publish or save
                version = self.learner.weights_version
                if version % cfg.publish_every == 0:
                    self.publish()
                    fh.flush()
                due_by_count = cfg.checkpoint_every and version % cfg.checkpoint_every == 0
                due_by_time = (
                    cfg.checkpoint_seconds and time.monotonic() - last_checkpoint >= cfg.checkpoint_seconds
                )
                if due_by_count or due_by_time:
                    self.checkpoints.save(self.learner)
                    last_checkpoint = time.monotonic()
        self.publish()
        path = self.checkpoints.save(self.learner)
        log.info("final checkpoint %s (version %d)", path, self.learner.weights_version)
        self.stop.set()
        self._priority_thread.join(timeout=10.0)

    def _finished(
        self, values: dict, priorities, keys, waited: float, elapsed: float, writer, started: float
    ) -> bool:
        """An update's results to the metrics, the priority sender and the updates log; False if skipped."""
        version = self.learner.weights_version
        if priorities is None:  # a non-finite loss or gradient: nothing reached the weights
            metrics.SKIPPED_BATCHES.inc()
            log.warning(
                "skipped a batch whose loss or gradients were not finite (%d so far)", self.learner.skipped
            )
            return False
        metrics.UPDATE_SECONDS.observe(elapsed)
        metrics.UPDATES.inc()
        self.updates_done += 1
        self._record(values)
        try:
            self._priorities.put_nowait((np.asarray(keys), np.asarray(priorities, dtype=np.float64)))
        except queue.Full:
            log.warning("priority queue full: dropping one batch of priority updates")
        logged = [round(values.get(key, float("nan")), 6) for key in LOGGED_VALUES.values()]
        writer.writerow(
            [version, round(time.monotonic() - started, 4), round(elapsed, 6), round(waited, 6), *logged]
        )
        return True

    def _record(self, values: dict) -> None:
        metrics.WEIGHTS_VERSION.set(self.learner.weights_version)
        for name in ("q1", "q2", "alpha", "demo"):
            if f"loss/{name}" in values:
                metrics.LOSS.labels(name).set(values[f"loss/{name}"])
        metrics.Q_MEAN.set(values.get("q/mean", float("nan")))
        metrics.ALPHA.set(values.get("alpha", float("nan")))
        metrics.TD_ABS_MEAN.set(values.get("td/abs_mean", float("nan")))
        metrics.ENTROPY.set(values.get("entropy/mean", float("nan")))
