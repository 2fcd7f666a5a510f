"""Configuration of the learner service (flags, ``PHYLORL_LEARNER_*`` environment variables or a file)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.common import security
from services.common.config import doc, load_config

ENV_PREFIX = "PHYLORL_LEARNER_"


@dataclass(frozen=True)
class LearnerConfig(security.ServerTLS, security.ClientTLS, security.GrpcToken, security.RedisAuth):
    """Everything the learner needs; see each field's ``doc``."""

    host: str = doc("Interface the gRPC inference endpoint listens on.", "0.0.0.0")
    port: int = doc("gRPC port of the inference endpoint (0 picks a free one, logged at start).", 50052)
    metrics_port: int = doc("Port of the Prometheus /metrics endpoint; 0 turns it off.", 9102)
    replay_address: str = doc("host:port of the replay service.", "127.0.0.1:50051")
    redis_url: str = doc("Redis where the published weights version is kept, read back at a restart so that "
                         "versions never go back ('' turns it off).",
                         "redis://127.0.0.1:6379/0")
    redis_wait_s: float = doc("How long to wait at start for Redis to answer before giving up (s).", 30.0)
    weights_key: str = doc("Redis key prefix of the published weights version (<prefix>:version).",
                           "phylorl:weights")
    run_dir: str = doc("Run directory: checkpoints/ and learner/updates.csv go here.", "runs/learner")
    device: str = doc("cpu, cuda, cuda:N or auto (cuda when available).", "auto")
    torch_threads: int = doc("CPU threads for torch (0: torch's default).", 0)
    batch_size: int = doc("Transitions per update.", 64)
    updates: int = doc("Stop after this many updates in total, restored ones included (0: run until stopped).", 0)
    publish_every: int = doc("Publish the weights to the inference endpoint (their version to Redis) every this "
                             "many updates.", 10)
    checkpoint_every: int = doc("Write a checkpoint every this many updates (0: only by time and at exit).", 500)
    checkpoint_seconds: float = doc("... and at least every this many seconds (0: not by time).", 300.0)
    keep_checkpoints: int = doc("Checkpoints kept on disk (oldest deleted).", 3)
    resume: bool = doc("Continue from the run directory's latest checkpoint when there is one.", True)
    prefetch: int = doc("Batches collated ahead of the update by the prefetch threads.", 2)
    prefetch_workers: int = doc("Threads that sample, decode and collate batches at once. One thread is bound by "
                                "the latency of each Sample call and by decoding and collating (about 70 ms of "
                                "CPU per 128 transitions of 20 taxa on the 2-core dev machine); a GPU learner "
                                "with spare cores wants several.", 2)
    sample_timeout_s: float = doc("Longest wait of one Sample call for the replay's rate limiter (s).", 5.0)
    inference_max_batch: int = doc("Most observations in one network call of the inference endpoint.", 64)
    inference_max_delay_ms: float = doc("Longest wait for more requests before a partial batch is run (ms).", 2.0)
    inference_queue: int = doc("Requests waiting for the network at most; beyond it: RESOURCE_EXHAUSTED.", 256)
    features: str = doc("Observation feature set the network reads: rich (move geometry, parsimony change, split "
                        "support) or basic (the original); the actors must send the same.", "rich")
    init_checkpoint: str = doc("Warm start: a learner checkpoint (e.g. from phylorl warmstart) whose networks and "
                               "alpha start this run when the run directory has no checkpoint of its own.", "")
    hidden: int = doc("Width of node embeddings, action embeddings and the Q head.", 256)
    gat_layers: int = doc("Number of GAT layers.", 3)
    action_features: str = doc("Action encoding: gather (node embeddings of p,s,x,y) or indices (original).",
                               "gather")
    lr: float = doc("Adam learning rate of the Q networks.", 3e-4)
    initial_alpha: float = doc("Starting temperature alpha.", 0.05)
    target_entropy_fraction: float = doc("Target policy entropy as a fraction of log|A| per state.", 0.5)
    tau: float = doc("Soft target update rate.", 0.005)
    demo_weight: float = doc("Weight of the supervised term on demonstration labels (transitions from actors with "
                             "label_fraction > 0); 0 ignores labels.", 1.0)
    demo_temperature: float = doc("Softmax temperature of the demonstrations' listwise cross-entropy (reward units).",
                                  0.02)
    seed: int = doc("Seed of the initial parameters and of action sampling.", 0)
    grace_s: float = doc("On SIGTERM, how long running calls may take to finish (s).", 10.0)
    log_level: str = doc("Python logging level.", "INFO")

    def __post_init__(self) -> None:
        problems = []
        if self.batch_size < 1 or self.publish_every < 1 or self.prefetch < 1 or self.prefetch_workers < 1:
            problems.append("batch_size, publish_every, prefetch and prefetch_workers must be >= 1")
        if self.inference_max_batch < 1 or self.inference_queue < 1 or self.inference_max_delay_ms < 0:
            problems.append("inference_max_batch and inference_queue must be >= 1, inference_max_delay_ms >= 0")
        if self.action_features not in ("gather", "indices"):
            problems.append(f"action_features must be gather or indices, got {self.action_features!r}")
        if self.features not in ("rich", "basic"):
            problems.append(f"features must be rich or basic, got {self.features!r}")
        if self.keep_checkpoints < 1:
            problems.append("keep_checkpoints must be >= 1")
        problems += security.check(self)
        if problems:
            raise ValueError("invalid learner config: " + "; ".join(problems))


def load(argv: Sequence[str], environ: Mapping[str, str]) -> LearnerConfig:
    return load_config(LearnerConfig, argv, environ, prefix=ENV_PREFIX, prog="python -m services.learner",
                       description="phylorl learner: twin soft-Q updates from replay, batched inference endpoint.")
