"""Settings of the embedded local run (``phylorl train``): one frozen dataclass.

Per-service settings beyond these go in the ``--config`` file under ``replay:``, ``learner:`` and
``actor:`` (field names as in each service's ``--help``); they become that service's flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TrainConfig:
    """What ``phylorl train`` runs (defaults: a useful short run on a 2-core machine)."""

    actors: int = 2
    """Actor processes."""
    envs_per_actor: int = 2
    """Environments stepped together by each actor."""
    alignments: str = ""
    """Corpus (directory or comma-separated files); empty: simulate a small one into the run directory."""
    updates: int = 300
    """Learner updates to run (0: until --minutes or Ctrl-C)."""
    minutes: float = 10.0
    """Wall-clock limit of the run (0: none)."""
    run_dir: str = ""
    """Run directory (default: runs/<date-time>)."""
    model: str = "GTR+F+G4"
    """Model string; free parameters are estimated once per alignment on its NJ tree."""
    horizon: int = 10
    """Steps per episode."""
    gamma: float = 0.9
    """Discount per environment step (0: each move is judged by its own reward alone)."""
    label_fraction: float = 0.0
    """Fraction of the actors' states whose every move is scored by the environment and sent as
    demonstration labels (costs one local branch optimisation per move)."""
    demo_weight: float = 1.0
    """Weight of the learner's supervised term on those labels."""
    batch_size: int = 32
    """Transitions per learner update."""
    hidden: int = 64
    """Network width (the designed 256 is for a GPU learner)."""
    min_replay: int = 128
    """Transitions in replay before the learner starts."""
    samples_per_insert: float = 8.0
    """Replay's sampled-to-inserted ratio (rate limiter; 0 = none)."""
    publish_every: int = 10
    """Publish the weights to the inference endpoint the actors ask (and their version to Redis) every this
    many updates."""
    features: str = "rich"
    """Observation feature set of actors and learner: rich or basic (the original)."""
    cache_dir: str = ""
    """Preparation cache shared by the actors (default: the run directory's ``cache/``)."""
    init_checkpoint: str = ""
    """Warm start: the learner starts from this checkpoint's networks (e.g. from phylorl warmstart)."""
    prometheus: int = 0
    """Start the installed Prometheus on this port, scraping the run's services with the compose stack's
    job names (so the dashboards' queries work); 0: none."""
    secure: bool = False
    """gRPC between the services with TLS and a shared token (made in the run directory's ``secrets/``).
    Redis always requires a password: the run's own ACL user, made there too."""
    max_restarts: int = 5
    """A service that dies (replay, learner, actor, Redis, Prometheus) is started again, at most this many
    times each; after that the run ends with "<service> failed"."""
    restart_backoff_s: float = 1.0
    """Wait before a restart: this, doubled per earlier restart of the same service, at most 30 s."""
    device: str = "auto"
    """Learner device: cpu, cuda or auto."""
    seed: int = 0
    """Seed of the simulated corpus, the learner and the actors."""
    simulate_count: int = 8
    """Alignments simulated when no corpus is given ..."""
    simulate_taxa: str = "7:10"
    """... their number of taxa ..."""
    simulate_sites: str = "300:800"
    """... and of sites."""
    report: bool = True
    """Write the PNG report (phylorl report) at the end."""
    replay: dict = field(default_factory=dict)
    """Extra replay-service fields."""
    learner: dict = field(default_factory=dict)
    """Extra learner-service fields."""
    actor: dict = field(default_factory=dict)
    """Extra actor-service fields."""

    def __post_init__(self):
        if self.actors < 1 or self.envs_per_actor < 1:
            raise ValueError("actors and envs_per_actor must be >= 1")
        if self.updates < 0 or self.minutes < 0:
            raise ValueError("updates and minutes must be >= 0")
        if not 0.0 <= self.gamma <= 1.0 or not 0.0 <= self.label_fraction <= 1.0 or self.demo_weight < 0:
            raise ValueError("gamma and label_fraction must lie in [0, 1], demo_weight >= 0")
        if self.features not in ("rich", "basic"):
            raise ValueError(f"features must be rich or basic, got {self.features!r}")
        if self.max_restarts < 0 or not self.restart_backoff_s >= 0:
            raise ValueError("max_restarts and restart_backoff_s must be >= 0")
        if not 0 <= self.prometheus < 65536:
            raise ValueError(f"prometheus must be a port (0: none), got {self.prometheus}")
        if self.updates == 0 and self.minutes == 0:
            raise ValueError("give --updates or --minutes (or both): the run needs an end")
