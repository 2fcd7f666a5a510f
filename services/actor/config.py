"""Configuration of an actor process (flags, ``PHYLORL_ACTOR_*`` environment variables or a file)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from phylorl.env.config import DRAWN_STARTS, EnvConfig
from services.common import security
from services.common.config import load_config

ENV_PREFIX = "PHYLORL_ACTOR_"
PROG = "python -m services.actor"
DESCRIPTION = "phylorl actor: steps tree environments, asks the learner for moves, feeds replay."


@dataclass(frozen=True)
class ActorConfig(security.ClientTLS, security.GrpcToken):
    """Everything an actor needs: its own fields and its environments' (``env``)."""

    learner_address: str = "127.0.0.1:50052"
    """host:port of the learner's inference endpoint."""
    replay_address: str = "127.0.0.1:50051"
    """host:port of the replay service."""
    metrics_port: int = 9103
    """Port of the Prometheus /metrics endpoint; 0 turns it off."""
    alignments: str = ""
    """Corpus: a directory of alignment files or a comma-separated list of files."""
    skip_unreadable: bool = False
    """Skip unreadable corpus files (reported in the log) instead of failing."""
    model: str = "GTR+F+G4"
    """Model string; free parameters are estimated once per alignment (cached)."""
    cache_dir: str = ".cache/phylorl/prepared"
    """Directory of the per-alignment preparation cache."""
    envs: int = 2
    """Environments stepped by this process (one batched inference call per group of them and step; see
    ``pipeline``)."""
    pipeline: int = 2
    """Groups the environments are split into (at most ``envs``): while one group's Act call is on its way to
    the learner and back, the actor steps the others (double buffering, as Sample Factory's rollout workers
    do), so that its core works instead of waiting on inference. 1: every environment in one call, stepped
    after it."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The tree environments: episode horizon, start trees, reward scale, move radius, local branch
    optimisation, observation feature set (which must be the learner's ``net.features``)."""
    gamma: float = 0.9
    """Discount per environment step (stored with each transition; initial priorities too)."""
    n_step: int = 1
    """Steps per transition's return (gamma**k discount on the bootstrap, k <= n_step)."""
    label_fraction: float = 0.0
    """Fraction of states whose every move is scored by the environment (one local branch optimisation per
    move) and sent as demonstration labels for the learner's supervised term; 0: none."""
    greedy: bool = False
    """Ask for greedy actions instead of samples of the soft policy."""
    send_batch: int = 16
    """Transitions per Insert call to the replay service."""
    buffer_capacity: int = 5000
    """Most transitions waiting in memory for the replay service; beyond it they wait only in the journal
    (spool_dir), or without one the oldest are dropped (counted)."""
    spool_dir: str = ""
    """Directory of the actors' outbox journals: every transition is written there until the replay service
    has stored it, and an actor starting sends what dead actors' journals still hold ('' = none: memory only,
    a crash loses what waits)."""
    spool_max_mb: float = 1024.0
    """Largest journal (MiB); beyond it new transitions are dropped (counted)."""
    max_steps: int = 0
    """Stop after this many environment steps per env (0: run until stopped)."""
    backoff_max_s: float = 5.0
    """Longest wait between reconnection attempts (s)."""
    rpc_timeout_s: float = 60.0
    """Deadline of one inference call (s)."""
    seed: int = 0
    """Seed of the environments (each env adds its index)."""
    actor_id: str = ""
    """Name of this actor in requests, logs and journal names (default: actor-<random>)."""
    log_level: str = "INFO"
    """Python logging level."""

    def __post_init__(self) -> None:
        problems = []
        if self.n_step < 1:
            problems.append(f"n_step must be >= 1, got {self.n_step}")
        if self.envs < 1:
            problems.append(f"envs must be >= 1, got {self.envs}")
        if self.pipeline < 1:
            problems.append(f"pipeline must be >= 1, got {self.pipeline}")
        if self.send_batch < 1 or self.buffer_capacity < self.send_batch:
            problems.append(
                f"need 1 <= send_batch <= buffer_capacity, got {self.send_batch}, {self.buffer_capacity}"
            )
        if not 0.0 <= self.gamma <= 1.0:
            problems.append(f"gamma must lie in [0, 1], got {self.gamma}")
        if not 0.0 <= self.label_fraction <= 1.0:
            problems.append(f"label_fraction must lie in [0, 1], got {self.label_fraction}")
        if self.env.start not in DRAWN_STARTS:
            problems.append(f"env.start must be one of {', '.join(DRAWN_STARTS)}: an actor has no given tree")
        if problems:
            raise ValueError("invalid actor config: " + "; ".join(problems))


def load(argv: Sequence[str], environ: Mapping[str, str]) -> ActorConfig:
    config = load_config(ActorConfig, argv, environ, prefix=ENV_PREFIX, prog=PROG, description=DESCRIPTION)
    if not config.alignments:
        raise ValueError(
            "invalid actor config: alignments is required (a directory or comma-separated files)"
        )
    return config
