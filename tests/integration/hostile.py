"""Hypothesis strategies of hostile input shared by the hostile-input tests of the inference endpoint and of
the replay service: a valid state's record bytes with exactly one thing broken.

A state is written part by part as :mod:`phylorl.records.format` lays it out, so that a part can be broken the
way no encoder would write it: an array cut short or of another dtype, a NaN or infinite value, a node id out
of range or negative, a leaf with two neighbours, a neighbour table that disagrees with the edges, a wrong
leaf count, or a tree with no SPR move (three taxa).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from phylorl.nets.synthetic import random_observation
from phylorl.records.arrays import encode_array, encode_ranked
from phylorl.records.format import (
    DEDUPE,
    FORM,
    HEADER,
    LEAF_FEATURES,
    MAGIC,
    OBSERVATION_HEADER,
    OBSERVATION_MAGIC,
    RICH_FORM,
    TREE,
    VERSION,
)
from phylorl.types import Observation

BAD_FLOATS = st.sampled_from([np.nan, np.inf, -np.inf])
ARRAYS = ("neighbors", "edges", "lengths", "deltas", "support")
HOW = ("shape", "dtype", "nonfinite", "node_id", "negative_id", "degree", "disagree", "n_leaves", "no_moves")


def valid(seed: int = 0, n_taxa: int = 6) -> Observation:
    """A rich state of a random tree over ``n_taxa`` taxa."""
    return random_observation(n_taxa, np.random.default_rng(seed))


def parts_of(obs: Observation) -> dict:
    """A state's parts, as copies that may be broken in place."""
    return dict(
        n_leaves=obs.n_leaves,
        radius=obs.radius,
        neighbors=obs.neighbors.copy(),
        edges=obs.edges.copy(),
        lengths=obs.lengths.copy(),
        deltas=obs.rich.deltas.copy(),
        parsimony_length=np.array([obs.rich.parsimony_length]),
        support=obs.rich.support.copy(),
    )


def state_bytes(parts: dict) -> bytes:
    """One rich state's bytes as they follow a record's header (parsimony changes ranked when they can be)."""
    out = [FORM.pack(RICH_FORM), TREE.pack(parts["n_leaves"], parts["radius"], DEDUPE | LEAF_FEATURES)]
    for name in ("neighbors", "edges", "lengths"):
        encode_array(parts[name], name, out)
    deltas = parts["deltas"]
    whole = deltas.dtype == np.float32 and np.all(np.isfinite(deltas)) and np.all(deltas == np.round(deltas))
    (encode_ranked if whole else encode_array)(deltas, "parsimony changes", out)
    encode_array(parts["parsimony_length"], "parsimony length", out)
    encode_array(parts["support"], "support", out)
    return b"".join(out)


def observation_record(state: bytes) -> bytes:
    return OBSERVATION_HEADER.pack(OBSERVATION_MAGIC, VERSION) + state


def transition_record(
    obs: bytes, next_obs: bytes, action: int = 0, reward: float = 0.25, discount: float = 0.9, flags: int = 0
) -> bytes:
    """A transition record without a taken row (the replay's check finds the taken move itself)."""
    return HEADER.pack(MAGIC, VERSION, flags, action, reward, discount, -1) + obs + next_obs


@st.composite
def broken(draw) -> bytes:
    """A valid state's bytes with one thing broken."""
    seed, n_taxa = draw(st.integers(0, 50)), draw(st.integers(4, 9))
    how = draw(st.sampled_from(HOW))
    if how == "no_moves":
        return state_bytes(parts_of(valid(seed, 3)))
    parts = parts_of(valid(seed, n_taxa))
    n_nodes = 2 * parts["n_leaves"] - 2
    if how == "shape":
        name = draw(st.sampled_from(ARRAYS))
        parts[name] = parts[name][:-1]
    elif how == "dtype":
        name = draw(st.sampled_from(ARRAYS))
        parts[name] = parts[name].astype(np.float32 if parts[name].dtype.kind in "iu" else np.int32)
    elif how == "nonfinite":
        name = draw(st.sampled_from(["lengths", "deltas", "support", "parsimony_length"]))
        parts[name][draw(st.integers(0, parts[name].size - 1))] = draw(BAD_FLOATS)
    elif how in ("node_id", "negative_id"):
        name = draw(st.sampled_from(["neighbors", "edges"]))
        flat = parts[name].reshape(-1)
        at = draw(st.integers(0, flat.size - 1))
        flat[at] = (
            n_nodes + draw(st.integers(0, 1000)) if how == "node_id" else -2 - draw(st.integers(0, 1000))
        )
    elif how == "degree":  # a leaf with a second neighbour
        leaf = draw(st.integers(0, parts["n_leaves"] - 1))
        parts["neighbors"][leaf, 1] = parts["n_leaves"] + draw(
            st.integers(0, n_nodes - parts["n_leaves"] - 1)
        )
    elif how == "disagree":  # an edge from a node to itself, which the neighbour table does not hold
        edge = draw(st.integers(0, parts["edges"].shape[0] - 1))
        parts["edges"][edge, 1] = parts["edges"][edge, 0]
    else:  # the leaf count of another tree
        parts["n_leaves"] += draw(st.sampled_from([-1, 1]))
    return state_bytes(parts)
