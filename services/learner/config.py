"""Configuration of the learner service (flags, ``PHYLORL_LEARNER_*`` environment variables or a file)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from phylorl.agent.config import AgentConfig
from phylorl.nets.config import NetworkConfig
from services.common import security
from services.common.config import load_config

ENV_PREFIX = "PHYLORL_LEARNER_"
PROG = "python -m services.learner"
DESCRIPTION = "phylorl learner: twin soft-Q updates from replay, batched inference endpoint."


@dataclass(frozen=True)
class LearnerConfig(security.ServerTLS, security.ClientTLS, security.GrpcToken, security.RedisAuth):
    """Everything the learner needs: its own fields, the Q networks (``net``) and the update (``agent``)."""

    host: str = "0.0.0.0"
    """Interface the gRPC inference endpoint listens on."""
    port: int = 50052
    """gRPC port of the inference endpoint (0 picks a free one, logged at start)."""
    metrics_port: int = 9102
    """Port of the Prometheus /metrics endpoint; 0 turns it off."""
    replay_address: str = "127.0.0.1:50051"
    """host:port of the replay service."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis where the published weights version is kept, read back at a restart so that versions never go
    back ('' turns it off)."""
    redis_wait_s: float = 30.0
    """How long to wait at start for Redis to answer before giving up (s)."""
    weights_key: str = "phylorl:weights"
    """Redis key prefix of the published weights version (<prefix>:version)."""
    run_dir: str = "runs/learner"
    """Run directory: checkpoints/ and learner/updates.csv go here."""
    device: str = "auto"
    """cpu, cuda, cuda:N or auto (cuda when available)."""
    torch_threads: int = 0
    """CPU threads for torch (0: torch's default)."""
    tf32: bool = False
    """On a CUDA device, let float32 matrix products and convolutions use TF32 tensor cores (about 1e-3
    relative per product; ``torch.backends.cuda.matmul.allow_tf32``): faster updates, and the fused head
    (``agent.fused_head``) pays only with it (``docs/benchmarks.md``)."""
    batch_size: int = 64
    """Transitions per update."""
    updates: int = 0
    """Stop after this many updates in total, restored ones included (0: run until stopped)."""
    publish_every: int = 10
    """Publish the weights to the inference endpoint (their version to Redis) every this many updates."""
    checkpoint_every: int = 500
    """Write a checkpoint every this many updates (0: only by time and at exit)."""
    checkpoint_seconds: float = 300.0
    """... and at least every this many seconds (0: not by time)."""
    keep_checkpoints: int = 3
    """Checkpoints kept on disk (oldest deleted)."""
    resume: bool = True
    """Continue from the run directory's latest checkpoint when there is one."""
    prefetch_workers: int = 2
    """Threads that sample and collate batches at once. One thread is bound by the latency of each Sample call
    and by collating (one compiled pass that releases the GIL); a GPU learner with spare cores wants
    several."""
    sample_timeout_s: float = 5.0
    """Longest wait of one Sample call for the replay's rate limiter (s)."""
    inference_max_batch: int = 64
    """Most observations in one network call of the inference endpoint."""
    inference_max_delay_ms: float = 2.0
    """Longest wait for more requests before a partial batch is run (ms)."""
    inference_queue: int = 256
    """Requests waiting for the network at most; beyond it: RESOURCE_EXHAUSTED."""
    inference_cuda_graphs: bool = True
    """On a CUDA device, the endpoint replays its answers as CUDA graphs, one per batch shape (a batch's
    states padded to a power-of-two count, or a multiple of 16 above 16, with copies of its last one;
    :mod:`phylorl.agent.capture`). A shape whose capture fails is answered eagerly (logged, counted). No
    effect on a CPU."""
    init_checkpoint: str = ""
    """Warm start: a learner checkpoint (e.g. another run's, or models/agent.pt) whose networks and alpha
    start this run when the run directory has no checkpoint of its own."""
    net: NetworkConfig = field(default_factory=lambda: NetworkConfig(features="rich"))
    """The Q networks of a new run (a resumed or warm-started run keeps its checkpoint's)."""
    agent: AgentConfig = field(default_factory=lambda: AgentConfig(demo_weight=1.0))
    """How the networks, their targets and the temperature are updated (a warm start uses these; a resumed
    run keeps its checkpoint's)."""
    seed: int = 0
    """Seed of the initial parameters and of action sampling."""
    grace_s: float = 10.0
    """On SIGTERM, how long running calls may take to finish (s)."""
    log_level: str = "INFO"
    """Python logging level."""

    def __post_init__(self) -> None:
        problems = []
        if self.batch_size < 1 or self.publish_every < 1 or self.prefetch_workers < 1:
            problems.append("batch_size, publish_every and prefetch_workers must be >= 1")
        if self.inference_max_batch < 1 or self.inference_queue < 1 or self.inference_max_delay_ms < 0:
            problems.append(
                "inference_max_batch and inference_queue must be >= 1, inference_max_delay_ms >= 0"
            )
        if self.keep_checkpoints < 1:
            problems.append("keep_checkpoints must be >= 1")
        problems += security.check(self)
        if problems:
            raise ValueError("invalid learner config: " + "; ".join(problems))


SWITCH_INTERVAL_MS = {"cuda": 0.5, "cpu": 5.0}
"""The interpreter's switch interval in the learner's process by device type (``sys.setswitchinterval``). Its
threads share one interpreter lock, which each torch call lets go: a thread coming back from one waits until
the thread running Python blocks or the interval forces a switch. On a GPU the update loop mostly waits on the
device, so a short interval pays; on a CPU, Python's 5 ms is faster (``benchmarks/bench_system.py``)."""


def load(argv: Sequence[str], environ: Mapping[str, str]) -> LearnerConfig:
    return load_config(LearnerConfig, argv, environ, prefix=ENV_PREFIX, prog=PROG, description=DESCRIPTION)
