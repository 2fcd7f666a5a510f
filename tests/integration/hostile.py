"""Hypothesis strategies of hostile input shared by the hostile-input tests of the inference endpoint
and of the replay service: a valid observation with exactly one thing broken."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from phylorl.env.tree_observation import build_observation
from phylorl.types import Observation
from phylorl.phylo import enumerate_moves, move_metadata, random_tree


def valid(seed: int = 0, n_taxa: int = 6) -> Observation:
    tree = random_tree([f"t{i}" for i in range(n_taxa)], np.random.default_rng(seed))
    moves = enumerate_moves(tree)
    return build_observation(tree, moves, move_metadata(tree, moves))



BAD_FLOATS = st.sampled_from([np.nan, np.inf, -np.inf])
FIELDS = ("node_features", "edge_index", "edge_attr", "actions", "action_meta")


@st.composite
def broken(draw):
    """A valid observation with one thing broken."""
    obs = valid(draw(st.integers(0, 50)), draw(st.integers(4, 9)))
    arrays = {name: getattr(obs, name).copy() for name in FIELDS}
    how = draw(st.sampled_from(["shape", "dtype", "nonfinite", "node_id", "negative_id", "degree", "no_moves"]))
    name = draw(st.sampled_from(FIELDS))
    if how == "shape":
        arrays[name] = arrays[name][..., :-1] if arrays[name].shape[-1] > 1 else np.concatenate(
            [arrays[name], arrays[name]], axis=-1)
    elif how == "dtype":
        arrays[name] = arrays[name].astype(np.float32 if arrays[name].dtype.kind in "iu" else np.int64)
    elif how == "nonfinite":
        name = draw(st.sampled_from(["node_features", "edge_attr", "action_meta"]))
        flat = arrays[name].reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = draw(BAD_FLOATS)
    elif how in ("node_id", "negative_id"):
        name = draw(st.sampled_from(["edge_index", "actions"]))
        flat = arrays[name].reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = (arrays["node_features"].shape[0] + draw(st.integers(0, 1000))
                                                     if how == "node_id" else -1 - draw(st.integers(0, 1000)))
    elif how == "degree":
        extra = np.array([[0, 0, 0, 0], [1, 2, 3, 4]], dtype=arrays["edge_index"].dtype)
        arrays["edge_index"] = np.concatenate([arrays["edge_index"], extra], axis=1)
        arrays["edge_attr"] = np.concatenate([arrays["edge_attr"], arrays["edge_attr"][:4]])
    else:
        arrays["actions"], arrays["action_meta"] = arrays["actions"][:0], arrays["action_meta"][:0]
    return Observation(**arrays)
