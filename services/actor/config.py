"""Configuration of an actor process (flags, ``PHYLORL_ACTOR_*`` environment variables or a file)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.common import security
from services.common.config import doc, load_config

ENV_PREFIX = "PHYLORL_ACTOR_"


@dataclass(frozen=True)
class ActorConfig(security.ClientTLS, security.GrpcToken):
    """Everything an actor needs; see each field's ``doc``."""

    learner_address: str = doc("host:port of the learner's inference endpoint.", "127.0.0.1:50052")
    replay_address: str = doc("host:port of the replay service.", "127.0.0.1:50051")
    metrics_port: int = doc("Port of the Prometheus /metrics endpoint; 0 turns it off.", 9103)
    alignments: str = doc("Corpus: a directory of alignment files or a comma-separated list of files.", "")
    skip_unreadable: bool = doc("Skip unreadable corpus files (reported in the log) instead of failing.", False)
    model: str = doc("Model string; free parameters are estimated once per alignment (cached).", "GTR+F+G4")
    cache_dir: str = doc("Directory of the per-alignment preparation cache.", ".cache/phylorl/prepared")
    envs: int = doc("Environments stepped together by this process (one batched inference call per step).", 2)
    horizon: int = doc("Steps per episode (truncation, not terminal).", 20)
    start: str = doc("Start trees: random or nj.", "random")
    reward_scale: float = doc("Reward = ΔlogL / |logL(NJ)| × reward_scale.", 100.0)
    radius: int | None = doc("Largest SPR radius (None: all moves).", None)
    features: str = doc("Observation feature set: rich (move geometry, parsimony change, split support) or basic "
                        "(the original); must match the learner's.", "rich")
    gamma: float = doc("Discount per environment step (stored with each transition; initial priorities too).", 0.9)
    n_step: int = doc("Steps per transition's return (gamma**k discount on the bootstrap, k <= n_step).", 1)
    label_fraction: float = doc("Fraction of states whose every move is scored by the environment (one local branch "
                                "optimisation per move) and sent as demonstration labels for the learner's "
                                "supervised term; 0: none.", 0.0)
    greedy: bool = doc("Ask for greedy actions instead of samples of the soft policy.", False)
    send_batch: int = doc("Transitions per Insert call to the replay service.", 16)
    buffer_capacity: int = doc("Most transitions waiting in memory for the replay service; beyond it they wait only "
                               "in the journal (spool_dir), or without one the oldest are dropped (counted).", 5000)
    spool_dir: str = doc("Directory of the actors' outbox journals: every transition is written there until the "
                         "replay service has stored it, and an actor starting sends what dead actors' journals "
                         "still hold ('' = none: memory only, a crash loses what waits).", "")
    spool_max_mb: float = doc("Largest journal (MiB); beyond it new transitions are dropped (counted).", 1024.0)
    max_steps: int = doc("Stop after this many environment steps per env (0: run until stopped).", 0)
    backoff_max_s: float = doc("Longest wait between reconnection attempts (s).", 5.0)
    rpc_timeout_s: float = doc("Deadline of one inference call (s).", 60.0)
    seed: int = doc("Seed of the environments (each env adds its index).", 0)
    actor_id: str = doc("Name of this actor in requests, logs and journal names (default: actor-<random>).", "")
    log_level: str = doc("Python logging level.", "INFO")

    def __post_init__(self) -> None:
        problems = []
        if not self.alignments:
            problems.append("alignments is required (a directory or comma-separated files)")
        if self.n_step < 1:
            problems.append(f"n_step must be >= 1, got {self.n_step}")
        if self.envs < 1:
            problems.append(f"envs must be >= 1, got {self.envs}")
        if self.send_batch < 1 or self.buffer_capacity < self.send_batch:
            problems.append(f"need 1 <= send_batch <= buffer_capacity, got {self.send_batch}, {self.buffer_capacity}")
        if not 0.0 <= self.gamma <= 1.0:
            problems.append(f"gamma must lie in [0, 1], got {self.gamma}")
        if not 0.0 <= self.label_fraction <= 1.0:
            problems.append(f"label_fraction must lie in [0, 1], got {self.label_fraction}")
        if self.features not in ("rich", "basic"):
            problems.append(f"features must be rich or basic, got {self.features!r}")
        if self.start not in ("random", "nj"):
            problems.append(f"start must be random or nj, got {self.start!r}")
        if problems:
            raise ValueError("invalid actor config: " + "; ".join(problems))

    @property
    def alignment_paths(self) -> list[str]:
        return [p for p in self.alignments.split(",") if p]


def load(argv: Sequence[str], environ: Mapping[str, str]) -> ActorConfig:
    return load_config(ActorConfig, argv, environ, prefix=ENV_PREFIX, prog="python -m services.actor",
                       description="phylorl actor: steps tree environments, asks the learner for moves, feeds replay.")
