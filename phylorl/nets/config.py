"""Sizes and options of the Q network (one frozen dataclass, defaults as first designed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from phylorl.types import FEATURE_SETS, feature_sizes

ActionFeatures = Literal["indices", "gather"]


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of one Q network: GAT tree encoder, action encoder, Q head.

    With the defaults and ``action_features="indices"`` this is the network as first designed
    (531,457 parameters per Q network). The default ``action_features="gather"`` replaces the
    7-number action input by the GNN embeddings of the move's four nodes (792,577 parameters).
    """

    node_features: int | None = None
    """Columns of ``Observation.node_features`` (None: those of ``features``; basic: 1, ``is_leaf``)."""

    edge_features: int | None = None
    """Columns of ``Observation.edge_attr`` (None: those of ``features``; basic: 1, the branch length)."""

    action_meta: int | None = None
    """Columns of ``Observation.action_meta`` (None: those of ``features``; basic: 3, pruned length,
    regraft length, distance)."""

    hidden: int = 256
    """Width of node embeddings; the tree embedding is ``3 * hidden`` (sum, mean, max pooling)."""

    gat_layers: int = 3
    """Number of GAT layers, each ``x = relu(GAT(x)) + x``."""

    heads: int = 4
    """Attention heads per GAT layer; each head has ``hidden // heads`` channels (concatenated)."""

    gat_self_loops: bool = True
    """Add a self loop per node as PyG's ``GATConv`` does by default (its edge feature is the
    mean of the node's incoming edge features, PyG's ``fill_value='mean'``)."""

    action_hidden: int = 256
    """Width of the action embedding."""

    action_features: ActionFeatures = "gather"
    """What the action encoder sees besides ``action_meta``.

    ``"gather"`` (default): the GNN embeddings of the move's nodes ``p, s, x, y``, so the network
    sees *where* in the tree a move prunes and regrafts. ``"indices"``: the four node ids fed as
    numbers, as first designed; ids are arbitrary labels (relabelling the nodes changes the input
    but not the tree), so this is kept only for comparison (DESIGN.md, Pitfalls)."""

    head_hidden: int = 256
    """Width of the two hidden layers of the Q head ``[tree; action] -> hidden -> hidden -> 1``."""

    dropout: float = 0.0
    """Dropout probability after the Q head's first layer (training only)."""

    features: str = "basic"
    """The observation feature set the network reads (:mod:`phylorl.env.features`); the three column
    counts above default to its own."""

    @classmethod
    def for_features(cls, features: str, **fields) -> "NetworkConfig":
        """A config whose input sizes match the feature set ``features`` (``basic`` or ``rich``)."""
        return cls(features=features, **fields)

    def __post_init__(self) -> None:
        own = feature_sizes(self.features)
        given = (self.node_features, self.edge_features, self.action_meta)
        # sizes that are exactly another feature set's were carried over from a copy of a config of that set
        # (``dataclasses.replace(cfg, features=...)``, a config section's default): they follow ``features``
        stale = any(given == feature_sizes(other) for other in FEATURE_SETS if other != self.features)
        for name, size, value in zip(("node_features", "edge_features", "action_meta"), own, given):
            if value is None or stale:
                object.__setattr__(self, name, size)
        for name in ("node_features", "edge_features", "action_meta", "hidden", "heads",
                     "action_hidden", "head_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"NetworkConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.gat_layers < 0:
            raise ValueError(f"NetworkConfig.gat_layers must be >= 0, got {self.gat_layers}")
        if self.hidden % self.heads:
            raise ValueError(f"NetworkConfig.hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.action_features not in ("indices", "gather"):
            raise ValueError(f"NetworkConfig.action_features must be 'indices' or 'gather', "
                             f"got {self.action_features!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"NetworkConfig.dropout must be in [0, 1), got {self.dropout}")

    @property
    def tree_embedding(self) -> int:
        """Width of the pooled tree embedding (sum, mean and max of node embeddings)."""
        return 3 * self.hidden
