"""Compact, lossless binary records of transitions: the form the replay service keeps in Redis.

One record holds one :class:`~phylorl.types.Transition`. Layout (all little-endian)::

    header   "<4sBBqddq" magic b"PRLT", format version (5), flags (bit 0 terminal, bit 1 truncated,
                         bit 2 labelled, bit 3 taken row),
                         action (int64), reward (float64), discount (float64),
                         policy_version (int64: weights version that chose the action, -1 unknown)
    obs, next_obs        each one observation, in one of three forms, after a "<B" form byte:
      0 (arrays)         its five arrays node_features, edge_index, edge_attr, actions, action_meta
      1 (tree)           "<IiB" leaves, move radius (-1: none), flags (bit 0 dedupe, bit 1 node
                         features are the plain is_leaf column), then the arrays neighbors [N, 3],
                         edges [N-1, 2], branch lengths float32 [N-1] and, without flag bit 1,
                         node_features. The other arrays are rebuilt when read: the moves are
                         ``enumerate_moves`` over the neighbour table's slot order, their metadata
                         and edge arrays follow from the lengths (phylorl.env.tree_observation).
      2 (rich tree)      as the tree form, then the rich features' parts (phylorl.env.features.RichParts):
                         float32 lengths, each move's parsimony change, the parsimony length, and
                         each edge's split support; the rich edge and move features are rebuilt.
    taken row            only with flag bit 3: two arrays, ``obs.actions[action]`` (the taken move's 4
                         node ids) and ``obs.action_meta[action]`` (its features), as ``obs`` holds them.
                         They repeat what the first observation rebuilds to; the learner's batch pass
                         reads them instead of enumerating the state's moves up to the taken one, and
                         every reader that rebuilds the state checks them against it.
    next_labels          only with flag bit 2: one float32 array, the demonstration label (reward)
                         of every move of next_obs, in the order of its actions.
Each array is stored as :mod:`phylorl.wire.arrays` describes; the rich form's parsimony changes ranked when
they are whole numbers (encoding 2: the learner's batch pass then reads each change's rank without counting the
moves). Version 4 is version 5 without ranked arrays, version 3 is version 4 without flag bit 3; all three are
read.
An observation record (what an inference request carries, :func:`encode_observation`) is ``"<4sB"``
magic b"PRLO" and the format version, then one observation in the same forms.

The tree forms are used when the observation carries a :class:`~phylorl.types.MoveSource` and
rebuilding from it gives back exactly its arrays (checked while encoding, once per state while the
state is unchanged: :mod:`phylorl.wire.section_cache`); otherwise the arrays form. Decoding gives back
arrays with the original dtype, shape and bit patterns (``-0.0`` and NaN payloads included) and Python
scalars for the rest. A 20-taxon state (1122 moves) takes about 0.8 kB in the tree form, 2.1 kB in the
rich tree form, 17 kB in the arrays form, against 102 kB of raw arrays.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from phylorl.types import Observation, Transition

from .arrays import decode_array as _decode_array, encode_array as _encode_array, encode_ranked, encode_row
from .section_cache import section_for

MAGIC, OBSERVATION_MAGIC = b"PRLT", b"PRLO"
VERSION = 5
READABLE_VERSIONS = (3, 4, 5)
OBS_FIELDS = ("node_features", "edge_index", "edge_attr", "actions", "action_meta")

_HEADER = struct.Struct("<4sBBqddq")
_OBSERVATION_HEADER = struct.Struct("<4sB")
_FORM = struct.Struct("<B")
_TREE = struct.Struct("<IiB")
_ARRAYS_FORM, _TREE_FORM, _RICH_FORM = 0, 1, 2
_DEDUPE, _LEAF_FEATURES = 1, 2
_TERMINAL, _TRUNCATED, _LABELLED, _TAKEN = 1, 2, 4, 8


def encode_transition(transition: Transition, version: int = VERSION) -> bytes:
    """Serialise ``transition`` into one compact record (see the module docstring). ``version``: an older
    readable version writes what that version wrote (version 4: no ranked arrays; 3: no taken row either)."""
    if version not in READABLE_VERSIONS:
        raise ValueError(f"cannot write format version {version}; versions {READABLE_VERSIONS} can be written")
    labels = transition.next_labels
    obs, action = transition.obs, int(transition.action)
    taken_row = version >= 4 and obs.actions.ndim == obs.action_meta.ndim == 2 \
        and 0 <= action < min(obs.actions.shape[0], obs.action_meta.shape[0])  # else no row, and checks refuse it
    flags = ((_TERMINAL if transition.terminal else 0) | (_TRUNCATED if transition.truncated else 0)
             | (_LABELLED if labels is not None else 0) | (_TAKEN if taken_row else 0))
    if labels is not None:
        labels = np.asarray(labels)
        if labels.dtype != np.float32 or labels.shape != (transition.next_obs.n_actions,):
            raise ValueError(f"next_labels must be float32 of shape ({transition.next_obs.n_actions},) "
                             f"(one per move of next_obs), got {labels.dtype} {labels.shape}")
    parts = [_HEADER.pack(MAGIC, version, flags, action, float(transition.reward),
                          float(transition.discount), int(transition.policy_version))]
    for prefix, state in (("obs", obs), ("next_obs", transition.next_obs)):
        if version == VERSION:
            _encode_observation(state, prefix, parts)
        else:  # not the kept section (this version's)
            _encode_section(state, prefix, parts, ranked=False)
    if taken_row:
        encode_row(obs.actions[action], "obs.actions[action]", parts)
        encode_row(obs.action_meta[action], "obs.action_meta[action]", parts)
    if labels is not None:
        _encode_array(labels, "next_labels", parts)
    return b"".join(parts)


def encode_observation(obs: Observation) -> bytes:
    """Serialise one observation into an observation record: ``"<4sB"`` magic b"PRLO" and the format
    version, then the observation as in a transition record (the tree forms when exact)."""
    parts = [_OBSERVATION_HEADER.pack(OBSERVATION_MAGIC, VERSION)]
    _encode_observation(obs, "observation", parts)
    return b"".join(parts)


def decode_observation(record: bytes | bytearray | memoryview) -> Observation:
    """Rebuild the observation held in an observation record (``ValueError`` naming what is wrong)."""
    buf = memoryview(record)
    if len(buf) < _OBSERVATION_HEADER.size:
        raise ValueError(f"observation record too short: {len(buf)} bytes")
    magic, version = _OBSERVATION_HEADER.unpack_from(buf, 0)
    _check_kind(magic, version, OBSERVATION_MAGIC, "observation")
    try:
        obs, offset = _decode_observation(buf, _OBSERVATION_HEADER.size)
    except (struct.error, IndexError, OverflowError) as e:
        raise ValueError(f"corrupt observation record: {e}") from None
    if offset != len(buf):
        raise ValueError(f"observation record has {len(buf) - offset} trailing bytes")
    return obs


def _encode_observation(obs: Observation, prefix: str, parts: list[bytes]) -> None:
    if obs.source is None:
        return _encode_section(obs, prefix, parts)
    parts.append(section_for(obs, lambda mark: _section(obs, prefix, mark)))  # encoded and checked once per state


def _section(obs: Observation, prefix: str, mark: int | None = None) -> bytes:
    own: list[bytes] = []
    _encode_section(obs, prefix, own, mark)
    return b"".join(own)


def _encode_section(obs: Observation, prefix: str, parts: list[bytes], mark: int | None = None,
                    ranked: bool = True) -> None:
    if obs.rich is not None and obs.source is not None and _encode_rich(obs, prefix, parts, mark, ranked):
        return
    tree = None
    if obs.source is not None:
        from phylorl.env.tree_observation import tree_arrays_of  # numba: only loaded when needed
        tree = tree_arrays_of(obs)
    if tree is None:
        parts.append(_FORM.pack(_ARRAYS_FORM))
        for name in OBS_FIELDS:
            _encode_array(getattr(obs, name), f"{prefix}.{name}", parts)
        return
    neighbors, edges, lengths, leaf_features = tree
    flags = (_DEDUPE if obs.source.dedupe else 0) | (_LEAF_FEATURES if leaf_features else 0)
    parts += [_FORM.pack(_TREE_FORM), _TREE.pack(obs.source.n_leaves, obs.source.radius, flags)]
    _encode_array(neighbors, f"{prefix}.neighbors", parts)
    _encode_array(edges, f"{prefix}.edges", parts)
    _encode_array(lengths, f"{prefix}.lengths", parts)
    if not leaf_features:
        _encode_array(obs.node_features, f"{prefix}.node_features", parts)


def _encode_rich(obs: Observation, prefix: str, parts: list[bytes], mark: int | None = None,
                 ranked: bool = True) -> bool:
    """Append ``obs`` in the rich tree form when its rebuild is exact (``mark``: its fingerprint); else ``False``.
    ``ranked``: the parsimony changes ranked when they can be (version 5)."""
    from phylorl.env.tree_observation import rich_tree_arrays_of  # numba: only loaded when needed

    tree = rich_tree_arrays_of(obs, mark)
    if tree is None:
        return False
    neighbors, edges, leaf_features = tree
    rich = obs.rich
    flags = (_DEDUPE if obs.source.dedupe else 0) | (_LEAF_FEATURES if leaf_features else 0)
    parts += [_FORM.pack(_RICH_FORM), _TREE.pack(obs.source.n_leaves, obs.source.radius, flags)]
    _encode_array(neighbors, f"{prefix}.neighbors", parts)
    _encode_array(edges, f"{prefix}.edges", parts)
    _encode_array(rich.lengths, f"{prefix}.lengths", parts)
    (encode_ranked if ranked else _encode_array)(rich.deltas, f"{prefix}.parsimony_deltas", parts)
    _encode_array(np.array([rich.parsimony_length]), f"{prefix}.parsimony_length", parts)
    _encode_array(rich.support, f"{prefix}.support", parts)
    if not leaf_features:
        _encode_array(obs.node_features, f"{prefix}.node_features", parts)
    return True


def decode_transition(record: bytes | bytearray | memoryview) -> Transition:
    """Rebuild the :class:`Transition` held in ``record``; arrays are fresh and writable."""
    buf = memoryview(record)
    if len(buf) < _HEADER.size:
        raise ValueError(f"transition record too short: {len(buf)} bytes, the header alone is {_HEADER.size}")
    magic, version, flags, action, reward, discount, policy_version = _HEADER.unpack_from(buf, 0)
    _check_kind(magic, version, MAGIC, "transition")
    try:
        observations, labels, offset = _decode_body(buf, flags, version, action)
    except (struct.error, IndexError, OverflowError) as e:  # a length or count that runs past the record
        raise ValueError(f"corrupt transition record: {e}") from None
    if offset != len(buf):
        raise ValueError(f"transition record has {len(buf) - offset} trailing bytes after its two observations")
    return Transition(
        obs=observations[0],
        action=action,
        reward=reward,
        next_obs=observations[1],
        terminal=bool(flags & _TERMINAL),
        truncated=bool(flags & _TRUNCATED),
        discount=discount,
        policy_version=policy_version,
        next_labels=labels,
    )


def _check_taken_row(obs: Observation, action: int, nodes: np.ndarray, meta: np.ndarray) -> None:
    """``ValueError`` unless the stored taken row is ``obs``'s row of move ``action``, bit for bit."""
    if not 0 <= action < obs.n_actions:
        raise ValueError(f"corrupt transition record: a taken row for action {action}, which is not one of "
                         f"the state's {obs.n_actions} moves")
    rows = (("node ids", nodes, obs.actions[action]), ("features", meta, obs.action_meta[action]))
    for name, stored, rebuilt in rows:
        if stored.dtype != rebuilt.dtype or stored.shape != rebuilt.shape or stored.tobytes() != rebuilt.tobytes():
            raise ValueError(f"corrupt transition record: the stored taken move's {name} are not those of move "
                             f"{action} of its state")


def _check_kind(magic: bytes, version: int, expected: bytes, kind: str) -> None:
    if magic != expected:
        raise ValueError(f"not a phylorl {kind} record: magic {bytes(magic)!r}, expected {expected!r}")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{kind} record format version {version}; this code reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))}")


def _decode_body(buf: memoryview, flags: int, version: int, action: int):
    offset = _HEADER.size
    observations = []
    for _ in range(2):
        obs, offset = _decode_observation(buf, offset)
        observations.append(obs)
    if flags & _TAKEN:
        if version < 4:
            raise ValueError(f"corrupt transition record: flag bit 3 (taken row) in a version {version} record")
        nodes, offset = _decode_array(buf, offset)
        meta, offset = _decode_array(buf, offset)
        _check_taken_row(observations[0], action, nodes, meta)
    labels = None
    if flags & _LABELLED:
        labels, offset = _decode_array(buf, offset)
        if labels.dtype != np.float32 or labels.shape != (observations[1].n_actions,):
            raise ValueError(f"corrupt transition record: next_labels {labels.dtype} {labels.shape} do not "
                             f"match the next state's {observations[1].n_actions} moves")
    return observations, labels, offset


def is_record(record: bytes | bytearray | memoryview) -> bool:
    """Cheap check that ``record`` starts like a record of a format version this code reads."""
    head = bytes(memoryview(record)[: len(MAGIC) + 1])
    return len(head) == len(MAGIC) + 1 and head[:len(MAGIC)] == MAGIC and head[-1] in READABLE_VERSIONS


def invalid_records(data: bytes | memoryview, offsets: np.ndarray) -> np.ndarray:
    """Indices of the records ``data[offsets[i]:offsets[i+1]]`` that fail :func:`is_record`."""
    return _invalid_records(np.frombuffer(data, dtype=np.uint8), np.asarray(offsets, dtype=np.int64),
                            np.frombuffer(MAGIC, dtype=np.uint8), np.array(READABLE_VERSIONS, dtype=np.uint8))


@njit(cache=True, nogil=True)
def _invalid_records(buf, offsets, magic, versions):
    bad = np.zeros(offsets.size - 1, np.bool_)
    for i in range(offsets.size - 1):
        start = offsets[i]
        if offsets[i + 1] - start < magic.size + 1:
            bad[i] = True
            continue
        for j in range(magic.size):
            if buf[start + j] != magic[j]:
                bad[i] = True
        known = False
        for v in versions:
            if buf[start + magic.size] == v:
                known = True
        if not known:
            bad[i] = True
    return np.flatnonzero(bad)


def _decode_observation(buf: memoryview, offset: int) -> tuple[Observation, int]:
    if offset + _FORM.size > len(buf):
        raise ValueError(f"transition record truncated at byte {offset}: missing an observation")
    (form,) = _FORM.unpack_from(buf, offset)
    offset += _FORM.size
    if form == _ARRAYS_FORM:
        arrays = []
        for _ in OBS_FIELDS:
            array, offset = _decode_array(buf, offset)
            arrays.append(array)
        return Observation(*arrays), offset
    if form == _RICH_FORM:
        return _decode_rich(buf, offset)
    if form != _TREE_FORM:
        raise ValueError(f"corrupt transition record: unknown observation form {form} at byte {offset - 1}")
    if offset + _TREE.size > len(buf):
        raise ValueError(f"transition record truncated at byte {offset}: missing a tree header")
    n_leaves, radius, flags = _TREE.unpack_from(buf, offset)
    offset += _TREE.size
    neighbors, offset = _decode_array(buf, offset)
    edges, offset = _decode_array(buf, offset)
    lengths, offset = _decode_array(buf, offset)
    node_features = None
    if not flags & _LEAF_FEATURES:
        node_features, offset = _decode_array(buf, offset)
    if neighbors.dtype != np.int32 or edges.dtype != np.int32 or lengths.dtype != np.float32:
        raise ValueError("corrupt transition record: tree arrays of the wrong dtype")
    from phylorl.env.tree_observation import observation_from_tree  # numba: only loaded when needed
    try:
        obs = observation_from_tree(neighbors, edges, lengths, n_leaves, radius, bool(flags & _DEDUPE), node_features)
    except ValueError as e:
        raise ValueError(f"corrupt transition record: {e}") from None
    return obs, offset


def _decode_rich(buf: memoryview, offset: int) -> tuple[Observation, int]:
    if offset + _TREE.size > len(buf):
        raise ValueError(f"transition record truncated at byte {offset}: missing a tree header")
    n_leaves, radius, flags = _TREE.unpack_from(buf, offset)
    offset += _TREE.size
    arrays = []
    for _ in range(6):
        array, offset = _decode_array(buf, offset)
        arrays.append(array)
    neighbors, edges, lengths, deltas, length, support = arrays
    node_features = None
    if not flags & _LEAF_FEATURES:
        node_features, offset = _decode_array(buf, offset)
    if neighbors.dtype != np.int32 or edges.dtype != np.int32 or lengths.dtype != np.float32 \
            or deltas.dtype != np.float32 or support.dtype != np.float32 or length.shape != (1,):
        raise ValueError("corrupt transition record: rich tree arrays of the wrong dtype or shape")
    from phylorl.env.features import RichParts  # numba: only loaded when needed
    from phylorl.env.tree_observation import rich_observation_from_tree

    try:
        obs = rich_observation_from_tree(neighbors, edges, n_leaves, radius, bool(flags & _DEDUPE),
                                         RichParts(lengths, deltas, float(length[0]), support), node_features)
    except ValueError as e:
        raise ValueError(f"corrupt transition record: {e}") from None
    return obs, offset
