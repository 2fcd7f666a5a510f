"""Configuration of the replay service (flags, ``PHYLORL_REPLAY_*`` environment variables or a file; see
:mod:`services.common.config`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.common import security
from services.common.config import config_json
from services.common.config import load_config as _load_config

ENV_PREFIX = "PHYLORL_REPLAY_"
PROG = "python -m services.replay"
DESCRIPTION = "phylorl prioritised replay service (gRPC, Redis-backed)."
__all__ = ["ENV_PREFIX", "ReplayConfig", "config_json", "load_config"]


@dataclass(frozen=True)
class ReplayConfig(security.ServerTLS, security.GrpcToken, security.RedisAuth):
    """Everything the replay service needs."""

    host: str = "0.0.0.0"
    """Interface the gRPC server listens on."""
    port: int = 50051
    """gRPC port (0 picks a free one, logged at start)."""
    metrics_port: int = 9101
    """Port of the Prometheus /metrics endpoint; 0 turns it off."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis holding the table, e.g. redis://127.0.0.1:6379/0."""
    redis_wait_s: float = 30.0
    """How long to wait at start for Redis to answer before giving up (s)."""
    key_prefix: str = "phylorl:replay"
    """Prefix of every Redis key of this table (several tables can share a Redis)."""
    capacity: int = 100_000
    """Most transitions held; the oldest are evicted first (FIFO)."""
    alpha: float = 0.6
    """Priority exponent: P(i) is proportional to priority_i ** alpha (0 = uniform)."""
    beta: float = 0.4
    """Default importance-sampling exponent (a Sample call may override it)."""
    min_size_to_sample: int = 1_000
    """Transitions needed before any Sample is served."""
    samples_per_insert: float = 0.0
    """Target ratio of sampled to inserted transitions; 0 = no ratio limit."""
    error_buffer: float = 1_000.0
    """Allowed drift of the sample/insert balance, in sampled transitions."""
    default_timeout_s: float = 30.0
    """Longest rate-limiter wait of a call that names no timeout (s)."""
    max_workers: int = 32
    """gRPC handler threads, i.e. calls handled at once (waiting ones included)."""
    grace_s: float = 10.0
    """On SIGTERM, how long running calls may take to finish (s)."""
    seed: int = -1
    """Seed of the sampling random generator; -1 draws one from the OS."""
    log_level: str = "INFO"
    """Python logging level."""

    def __post_init__(self) -> None:
        problems = []
        if not 0 <= self.port < 65536 or not 0 <= self.metrics_port < 65536:
            problems.append(
                f"ports must lie in 0..65535 (port={self.port}, metrics_port={self.metrics_port})"
            )
        if self.capacity < 1:
            problems.append(f"capacity must be >= 1, got {self.capacity}")
        if not 1 <= self.min_size_to_sample <= self.capacity:
            problems.append(
                f"min_size_to_sample must lie in 1..capacity={self.capacity}, got {self.min_size_to_sample}"
            )
        if self.alpha < 0 or self.beta < 0:
            problems.append(f"alpha and beta must be >= 0, got alpha={self.alpha}, beta={self.beta}")
        if self.samples_per_insert < 0:
            problems.append(f"samples_per_insert must be >= 0, got {self.samples_per_insert}")
        if self.samples_per_insert > 0 and self.error_buffer <= 0:
            problems.append(
                f"error_buffer must be > 0 with a samples_per_insert limit, got {self.error_buffer}"
            )
        for name in ("redis_wait_s", "default_timeout_s", "grace_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0, got {getattr(self, name)}")
        if self.max_workers < 1:
            problems.append(f"max_workers must be >= 1, got {self.max_workers}")
        if not self.key_prefix:
            problems.append("key_prefix must not be empty")
        problems += security.check(self)
        if problems:
            raise ValueError("invalid replay config: " + "; ".join(problems))


def load_config(argv: Sequence[str], environ: Mapping[str, str]) -> ReplayConfig:
    """Build a :class:`ReplayConfig` from flags ``argv``, environment ``environ`` and an optional file."""
    return _load_config(ReplayConfig, argv, environ, prefix=ENV_PREFIX, prog=PROG, description=DESCRIPTION)
