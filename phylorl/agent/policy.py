"""A trained agent as a search policy (:class:`AgentPolicy`: the move of highest ``min(Q1, Q2)`` of a learner
checkpoint's twin online networks, as the inference endpoint's greedy answer)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from phylorl.agent.acting import policy_networks
from phylorl.agent.checkpoints import latest_checkpoint
from phylorl.agent.learner import CHECKPOINT_FORMAT
from phylorl.env.climbs import RankedClimb
from phylorl.env.search import ranked_climb_with_restarts, run_search
from phylorl.env.tree_env import TreeEnv
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import move_to
from phylorl.nets.qnet import QNetwork
from phylorl.nets.twin import TwinQ
from phylorl.phylo.topology_key import neighbor_key, topology_key
from phylorl.records.collate import state_inputs


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint file ``path`` names: the file itself, or for a run directory (or its ``checkpoints``
    directory) the file named by ``checkpoints/latest``."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    for directory in (path / "checkpoints", path):
        target = latest_checkpoint(directory)
        if target is not None:
            return target
    raise FileNotFoundError(
        f"{str(path)!r} is a directory without checkpoints/latest: pass a checkpoint file "
        "or a training run directory"
    )


DEFAULT_TABU = 20
"""How many of its best-ranked moves the agent may pass over to avoid a tree already visited in the same
search (``--tabu``; 0: plain greedy). Chosen on ``train/``: see models/README.md."""


class AgentPolicy:
    """Greedy policy of twin Q networks (put in eval mode here): the move of highest ``min(Q1(s, a), Q2(s,
    a))`` (their mean ranks no better on ``valid/``: models/README.md). ``alpha`` only enters the soft value.
    ``tabu``: how many of the highest moves may be passed over to avoid a tree already visited in the same
    search (by topology alone: compiled 64-bit keys of the split sets, :mod:`phylorl.phylo.topology_key`)."""

    def __init__(self, nets: tuple[QNetwork, QNetwork], alpha: float = 1.0, tabu: int = DEFAULT_TABU):
        if len(nets) != 2:
            raise ValueError(f"AgentPolicy needs the two Q networks, got {len(nets)}")
        if tabu < 0:
            raise ValueError(f"tabu must be >= 0, got {tabu}")
        self.nets = tuple(net.eval() for net in nets)
        self.features = nets[0].cfg.features
        self.tabu = tabu
        self._search = None  # (environment, alignment, start log-likelihood) of the search in progress
        self._visited: set[int] = set()
        self.alpha = float(alpha)
        self.device = next(self.nets[0].parameters()).device
        self._twin = TwinQ(*self.nets)  # both networks in one pass (where it applies: TwinQ)

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike, device: torch.device | str = "cpu", tabu: int = DEFAULT_TABU
    ) -> AgentPolicy:
        """A policy from a :meth:`Learner.save` checkpoint file or a training run directory."""
        file = resolve_checkpoint(path)
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except Exception:  # torch raises several types for a file that is not a checkpoint
            raise ValueError(
                f"{file}: not a learner checkpoint (torch cannot read it as a saved checkpoint)"
            ) from None
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{file}: not a learner checkpoint of format {CHECKPOINT_FORMAT}")
        try:
            net_cfg = NetworkConfig(**state["net_cfg"])
            nets = policy_networks(net_cfg, {"q1": state["q1"], "q2": state["q2"]}, device)
        except (KeyError, TypeError, RuntimeError) as exc:
            raise ValueError(f"{file}: checkpoint does not match this version's Q network ({exc})") from None
        return cls(nets, float(state["log_alpha"].exp()), tabu)

    @torch.inference_mode()
    def q_values(self, env: TreeEnv) -> np.ndarray:
        """``min(Q1, Q2)`` of every move of ``env``'s state, ``[A]``."""
        inputs = move_to(state_inputs([env.observation(self.features)]), self.device)
        return self._twin(*inputs).cpu().numpy()

    def choose(self, env: TreeEnv) -> int | None:
        """Index of the greedy move in ``env.moves``; ``None`` when the state has no move."""
        if env.tree is None:
            raise RuntimeError("reset the environment before asking the policy for a move")
        if not len(env.moves):
            return None
        q = self.q_values(env)
        if not self.tabu:
            return int(np.argmax(q))  # the first of equal maxima, as select_actions
        search = (id(env), id(env.current), env.start_loglik)
        if search != self._search or env.steps == 0:  # a new search: a fresh memory of visited trees
            self._search, self._visited = search, set()
        self._visited.add(topology_key(env.tree))
        best = int(np.argmax(q))  # the first of equal maxima, as the stable order below
        if neighbor_key(env.tree, env.moves[best]) not in self._visited:
            return best  # the usual case: no sort needed
        order = np.argsort(-q, kind="stable")
        for action in order[1 : self.tabu]:
            if neighbor_key(env.tree, env.moves[action]) not in self._visited:
                return int(action)
        return int(order[0])


class GuidedClimb(RankedClimb):
    """Hill-climbing whose candidate moves are ordered by an agent's values
    (:class:`~phylorl.env.search.RankedClimb`): the top 5% of moves (at least 8) are scored first."""

    def __init__(
        self,
        agent: AgentPolicy,
        top: float = 0.05,
        min_top: int = 8,
        certify: bool = True,
        lazy_margin: float | None = None,
        lazy_top: int | None = None,
    ):
        super().__init__(top, min_top, certify, lazy_margin, lazy_top)
        self.agent = agent

    def scores(self, env: TreeEnv) -> np.ndarray:
        return self.agent.q_values(env)


POLISH_RESTARTS = 5
"""Perturb-and-climb rounds of :func:`polish` after its first climb."""

POLISH_LAZY_TOP = 4
"""Of the agent's top moves in a step of :func:`polish`, the 4 best by lazy SPR score are evaluated fully
first."""

POLISH_LAZY_MARGIN = 10.0
"""When none of the agent's top moves improves in the last climb of :func:`polish`, the other moves within
this many log-likelihood units by lazy SPR score are evaluated fully."""


def polish(
    env: TreeEnv,
    agent: AgentPolicy | None,
    restarts: int = POLISH_RESTARTS,
    rng: np.random.Generator | None = None,
    distinct: bool = True,
):
    """Finish a search from ``env``'s current tree (an agent's answer): agent-guided climbs with ``restarts``
    perturb-and-climb rounds, then one certified climb from the best tree, so the answer is an SPR local
    optimum with every branch optimised (:func:`~phylorl.env.search.ranked_climb_with_restarts`, with
    :data:`POLISH_LAZY_TOP` and :data:`POLISH_LAZY_MARGIN`). Without an agent: plain hill-climbing with the
    same restarts (``distinct``: see :func:`~phylorl.env.search.run_search`). Returns one
    :class:`~phylorl.env.search.SearchResult` covering both phases."""
    rng = rng if rng is not None else np.random.default_rng(0)
    if agent is None:
        return run_search(env, "hillclimb", steps=None, restarts=restarts, rng=rng, distinct=distinct)
    return ranked_climb_with_restarts(
        env,
        lambda certify: GuidedClimb(
            agent, certify=certify, lazy_margin=POLISH_LAZY_MARGIN, lazy_top=POLISH_LAZY_TOP
        ),
        restarts,
        rng,
    )
