"""Sizes and options of the Q network (one frozen dataclass, defaults as first designed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from phylorl.types import feature_sizes

ActionFeatures = Literal["indices", "gather"]


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of one Q network: GAT tree encoder, action encoder, Q head. With ``features="basic"`` and
    ``action_features="indices"`` this is the network as first designed (531,457 parameters); the default
    ``"gather"`` feeds the GNN embeddings of the move's four nodes instead of their ids, and the rich features
    add 12 move and 2 edge columns."""

    hidden: int = 256
    """Width of node embeddings; the tree embedding is ``3 * hidden`` (sum, mean, max pooling)."""

    gat_layers: int = 3
    """Number of GAT layers, each ``x = relu(GAT(x)) + x``."""

    heads: int = 4
    """Attention heads per GAT layer; each head has ``hidden // heads`` channels (concatenated)."""

    gat_self_loops: bool = True
    """Add a self loop per node as PyG's ``GATConv`` does by default (edge feature: the mean of the node's
    incoming ones, ``fill_value='mean'``)."""

    action_hidden: int = 256
    """Width of the action embedding."""

    action_features: ActionFeatures = "gather"
    """What the action encoder sees besides ``action_meta``: ``"gather"``, the GNN embeddings of the move's
    nodes ``p, s, x, y`` (*where* in the tree a move prunes and regrafts); ``"indices"``, the four node ids as
    numbers, as first designed, kept only for comparison (ids are arbitrary labels: DESIGN.md, Pitfalls)."""

    head_hidden: int = 256
    """Width of the two hidden layers of the Q head ``[tree; action] -> hidden -> hidden -> 1``."""

    dropout: float = 0.0
    """Dropout probability after the Q head's first layer (training only)."""

    features: str = "rich"
    """The feature set the network reads (:mod:`phylorl.records.features`): ``rich`` or ``basic`` (as first
    designed)."""

    def __post_init__(self) -> None:
        feature_sizes(self.features)  # a known feature set (ValueError naming it otherwise)
        for name in ("hidden", "heads", "action_hidden", "head_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"NetworkConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.gat_layers < 0:
            raise ValueError(f"NetworkConfig.gat_layers must be >= 0, got {self.gat_layers}")
        if self.hidden % self.heads:
            raise ValueError(
                f"NetworkConfig.hidden ({self.hidden}) must be divisible by heads ({self.heads})"
            )
        if self.action_features not in ("indices", "gather"):
            raise ValueError(
                f"NetworkConfig.action_features must be 'indices' or 'gather', got {self.action_features!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"NetworkConfig.dropout must be in [0, 1), got {self.dropout}")

    @property
    def node_features(self) -> int:
        """Node feature columns of the feature set (``is_leaf``)."""
        return feature_sizes(self.features)[0]

    @property
    def edge_features(self) -> int:
        """Edge feature columns of the feature set (basic: the branch length)."""
        return feature_sizes(self.features)[1]

    @property
    def action_meta(self) -> int:
        """Move feature columns of the feature set (basic: pruned and regraft lengths, distance)."""
        return feature_sizes(self.features)[2]

    @property
    def tree_embedding(self) -> int:
        """Width of the pooled tree embedding (sum, mean and max of node embeddings)."""
        return 3 * self.hidden
