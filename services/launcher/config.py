"""Settings of the embedded local run (``phylorl train``): one frozen dataclass with the three services'
configs as typed sections.

Loaded by :func:`services.common.config.load_config` like every service's config: ``--config FILE`` (YAML or
JSON, sections as nested mappings), ``PHYLORL_TRAIN_<FIELD>`` (``PHYLORL_TRAIN_LEARNER__AGENT__LR``) and
flags (``--learner.agent.lr``), every one listed by ``phylorl train --help``. The sections default to the
services' own defaults except where a short local run on a small machine wants others (see the fields
below); the launcher sets what connects the services (addresses, ports, Redis, secrets, directories,
seeds). The short fields (``--hidden``, ``--horizon``, ...) set their section fields, as their docs say;
left unset (None) they leave the sections as they are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from phylorl.env.config import EnvConfig
from phylorl.nets.config import NetworkConfig
from services.actor.config import ActorConfig
from services.common.config import build, put
from services.learner.config import LearnerConfig
from services.replay.config import ReplayConfig

_CONNECTION = "host port metrics_port redis_url redis_username redis_password_file tls_cert_file tls_key_file"
_SET = {
    "replay": f"{_CONNECTION} tls_ca_file token_file seed",
    "learner": f"{_CONNECTION} tls_ca_file token_file replay_address run_dir updates seed",
    "actor": "learner_address replay_address metrics_port alignments cache_dir seed actor_id spool_dir "
    "tls_ca_file token_file",
}
SET_BY_LAUNCHER = frozenset(f"{section}.{name}" for section, names in _SET.items() for name in names.split())
"""Section fields the launcher sets (addresses, ports, Redis, secrets, directories, seeds): not flags."""


def _sets(targets: str):
    """A short field (None: unset) that sets the section fields ``targets`` (space-separated paths)."""
    return field(default=None, metadata={"sets": targets})


@dataclass(frozen=True)
class TrainConfig:
    """What ``phylorl train`` runs (defaults: a useful short run on a 2-core machine)."""

    actors: int = 2
    """Actor processes."""
    alignments: str = field(default="", metadata={"multiple": True})
    """Corpus (directories and/or files; comma-separated or the flag repeated); empty: simulate a small one
    into the run directory."""
    updates: int = field(default=300, metadata={"sets": "learner.updates"})
    """Learner updates to run (0: until --minutes or Ctrl-C)."""
    minutes: float = 10.0
    """Wall-clock limit of the run (0: none)."""
    run_dir: str = ""
    """Run directory (default: runs/<date-time>)."""
    seed: int = field(default=0, metadata={"sets": "replay.seed learner.seed"})
    """Seed of the simulated corpus, the replay service, the learner and the actors (actor i: seed + 1000
    i)."""
    cache_dir: str = ""
    """Preparation cache shared by the actors (default: the one ``phylorl search`` and ``eval`` use,
    ``$XDG_CACHE_HOME/phylorl/prepared`` or ``~/.cache/phylorl/prepared``; keyed by content and model, so a
    corpus is prepared once for every later run)."""
    prometheus: int = field(default=0, metadata={"const": 9090})
    """Start the installed Prometheus on this port (the flag alone: 9090), scraping the run's services with
    the compose stack's job names (so the dashboards' queries work); 0: none."""
    secure: bool = False
    """gRPC between the services with TLS and a shared token (made in the run directory's ``secrets/``). Redis
    always requires a password: the run's own ACL user, made there too."""
    max_restarts: int = 5
    """A service that dies (replay, learner, actor, Redis, Prometheus) is started again, at most this many
    times each; after that the run ends with "<service> failed"."""
    restart_backoff_s: float = 1.0
    """Wait before a restart: this, doubled per earlier restart of the same service, at most 30 s."""
    simulate_count: int = 8
    """Alignments simulated when no corpus is given ..."""
    simulate_taxa: str = "7:10"
    """... their number of taxa ..."""
    simulate_sites: str = "300:800"
    """... and of sites."""
    report: bool = True
    """Write the PNG report (phylorl report) at the end."""

    envs_per_actor: int | None = _sets("actor.envs")
    """Sets actor.envs: environments stepped together by each actor."""
    model: str | None = _sets("actor.model")
    """Sets actor.model: the model string; free parameters are estimated once per alignment on its NJ tree."""
    features: str | None = _sets("actor.env.features learner.net.features")
    """Sets actor.env.features and learner.net.features: the observation feature set (rich or basic)."""
    horizon: int | None = _sets("actor.env.horizon")
    """Sets actor.env.horizon: steps per episode."""
    gamma: float | None = _sets("actor.gamma")
    """Sets actor.gamma: discount per environment step (0: each move is judged by its own reward alone)."""
    label_fraction: float | None = _sets("actor.label_fraction")
    """Sets actor.label_fraction: the fraction of states whose every move is scored by the environment and
    sent as demonstration labels (one local branch optimisation per move)."""
    demo_weight: float | None = _sets("learner.agent.demo_weight")
    """Sets learner.agent.demo_weight: the weight of the supervised term on those labels."""
    hidden: int | None = _sets("learner.net.hidden learner.net.action_hidden learner.net.head_hidden")
    """Sets learner.net.hidden, action_hidden and head_hidden: the network width (a GPU learner can take the
    designed 256)."""
    batch_size: int | None = _sets("learner.batch_size")
    """Sets learner.batch_size: transitions per update."""
    publish_every: int | None = _sets("learner.publish_every")
    """Sets learner.publish_every: updates between publications of the weights to the inference endpoint."""
    device: str | None = _sets("learner.device")
    """Sets learner.device: cpu, cuda or auto."""
    init_checkpoint: str | None = _sets("learner.init_checkpoint")
    """Sets learner.init_checkpoint: a checkpoint whose networks start the run (e.g. another run's)."""
    min_replay: int | None = _sets("replay.min_size_to_sample")
    """Sets replay.min_size_to_sample: transitions in replay before the learner starts."""
    samples_per_insert: float | None = _sets("replay.samples_per_insert")
    """Sets replay.samples_per_insert: the sampled-to-inserted ratio of the rate limiter (0: none)."""

    replay: ReplayConfig = field(
        default_factory=lambda: ReplayConfig(min_size_to_sample=128, samples_per_insert=8.0)
    )
    """The replay service (its address, ports and Redis are the launcher's)."""
    learner: LearnerConfig = field(
        default_factory=lambda: LearnerConfig(
            batch_size=32, net=NetworkConfig(features="rich", hidden=64, action_hidden=64, head_hidden=64)
        )
    )
    """The learner (its addresses, ports, run directory and Redis are the launcher's)."""
    actor: ActorConfig = field(default_factory=lambda: ActorConfig(envs=2, env=EnvConfig(horizon=10)))
    """Every actor (addresses, ports, ids, seeds, corpus, cache and journal directory are the launcher's)."""

    def __post_init__(self):
        if self.actors < 1:
            raise ValueError("actors must be >= 1")
        if self.updates < 0 or self.minutes < 0:
            raise ValueError("updates and minutes must be >= 0")
        if self.max_restarts < 0 or not self.restart_backoff_s >= 0:
            raise ValueError("max_restarts and restart_backoff_s must be >= 0")
        if not 0 <= self.prometheus < 65536:
            raise ValueError(f"prometheus must be a port (0: none), got {self.prometheus}")
        if self.updates == 0 and self.minutes == 0:
            raise ValueError("give --updates or --minutes (or both): the run needs an end")
        replay, learner, actor = self.sections()  # the services' own checks, with the short fields applied
        if learner.net.features != actor.env.features:
            raise ValueError(
                f"learner.net.features ({learner.net.features}) and actor.env.features "
                f"({actor.env.features}) must be the same feature set"
            )

    def absolute(self, run_dir_default: str) -> TrainConfig:
        """This config with every path it names absolute (``run_dir`` defaulting to ``run_dir_default``),
        resolved against the working directory once, where the run starts: the services and Redis are started
        in other directories (Redis changes into its data directory), so no child may depend on this one's."""

        def absolute(path: str | None) -> str | None:
            return str(Path(path).expanduser().resolve()) if path else path

        return dataclasses.replace(
            self,
            run_dir=absolute(self.run_dir or run_dir_default),
            cache_dir=absolute(self.cache_dir),
            alignments=",".join(absolute(a) for a in self.alignments.split(",") if a),
            init_checkpoint=absolute(self.init_checkpoint),
            learner=dataclasses.replace(self.learner, init_checkpoint=absolute(self.learner.init_checkpoint)),
        )

    def sections(self) -> tuple[ReplayConfig, LearnerConfig, ActorConfig]:
        """The three sections with the short fields that are set applied (field metadata ``sets``: the section
        fields each sets; ``updates`` and ``seed`` always are)."""
        values: dict = {}
        for f in dataclasses.fields(self):
            if (value := getattr(self, f.name)) is not None:
                for target in f.metadata.get("sets", "").split():
                    put(values, target.split("."), value)
        sections = {"replay": self.replay, "learner": self.learner, "actor": self.actor}
        return tuple(build(type(s), values.get(name, {}), s) for name, s in sections.items())
