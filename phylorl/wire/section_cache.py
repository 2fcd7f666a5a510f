"""Each state's encoded section, kept on the observation so that encoding it again costs a hash.

An actor encodes every state up to three times: in its inference request, then as the next state of
one transition and the state of the next. Encoding a tree form checks the observation against a
rebuild from its tree (:mod:`phylorl.wire.record`), the costly part. The first encoding leaves the
section's bytes on the observation with a fingerprint of everything it was made from (the five
arrays, the move source and the rich parts, with their dtypes and shapes); a later encoding reuses
the bytes only while the fingerprint is the same, so a changed observation is encoded afresh.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import xxhash

from phylorl.types import Observation

_ATTRIBUTE = "_record_section"


def fingerprint(obs: Observation) -> int:
    """A 64-bit hash (xxh3) of everything an observation's record section is made from."""
    h = xxhash.xxh3_64()
    arrays = [obs.node_features, obs.edge_index, obs.edge_attr, obs.actions, obs.action_meta]
    source = obs.source
    if source is not None:
        arrays.append(source.neighbors)
        h.update(repr((source.n_leaves, source.radius, source.dedupe)).encode())
    rich = obs.rich
    if rich is not None:
        arrays += [rich.lengths, rich.deltas, rich.support]
        h.update(repr(float(rich.parsimony_length)).encode())
    for array in arrays:
        array = np.ascontiguousarray(array)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        if array.size:  # (an empty one is its dtype and shape: a state without moves has no move rows)
            h.update(memoryview(array).cast("B"))
    return h.intdigest()


def section_for(obs: Observation, make: Callable[[int], bytes]) -> bytes:
    """The section encoded earlier for ``obs`` while its fingerprint is unchanged; else ``make(fingerprint)``,
    kept."""
    mark = fingerprint(obs)
    kept = obs.__dict__.get(_ATTRIBUTE)
    if kept is not None and kept[0] == mark:
        return kept[1]
    section = make(mark)
    obs.__dict__[_ATTRIBUTE] = (mark, section)
    return section


def forget(obs: Observation) -> None:
    """Drop the section kept for ``obs`` (its next encoding checks it again; for benchmarks and tests)."""
    obs.__dict__.pop(_ATTRIBUTE, None)
