"""Simulating DNA alignments along trees: the training corpora and the tests' ground truth.

``simulate_dataset(n_taxa, n_sites, rng)`` draws a realistic model (:func:`random_model`), a random tree with
realistic branch lengths (:func:`realistic_tree`) and an alignment evolved along it
(:func:`simulate_alignment`). Everything here is pure: all randomness comes from the ``rng`` argument, so one
seed gives the same data on every machine (numpy's ``Generator`` streams are stable across platforms).

Parameter distributions (chosen to resemble GTR+G(+I) fits of real nucleotide alignments: in published fits
transitions AG and CT run 2–6 times faster than transversions, base frequencies lie in roughly 0.15–0.35,
gamma shapes in 0.2–2, pinv in 0–0.3, and most branches are 0.005–0.3 substitutions per site, internal ones
shorter than terminal ones):

* exchangeabilities ``AC, AG, AT, CG, CT, GT = typical * exp(N(0, 0.4^2))`` with typical values
  ``(1, 3, 0.8, 0.8, 3, 1)`` (:data:`TYPICAL_EXCHANGEABILITIES`), then divided by GT (so each
  rate relative to GT has a log standard deviation of ``0.4 * sqrt(2) = 0.57``);
* base frequencies ``Dirichlet(a, a, a, a)`` with ``a ~ Uniform(10, 20)`` (each frequency's standard
  deviation is 0.05–0.07 around 0.25);
* gamma shape ``alpha ~ LogUniform(0.2, 2)`` with 4 categories (mean-rate discretisation, as IQ-TREE);
* ``+I`` with probability 0.5, then ``pinv ~ Uniform(0, 0.3)``;
* branch lengths ``Gamma(shape 1.5)`` with mean ``0.08 s`` for terminal and ``0.04 s`` for internal
  branches, ``s ~ LogUniform(0.5, 2)`` drawn once per tree so that a corpus holds both shallow
  (near-identical sequences) and deep (saturated) trees.

Numbers are rounded (4 significant digits; frequencies and pinv to 4 decimals) so that the model strings stay
short and ``parse_model(str(spec)) == spec`` holds exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from phylorl.phylo.alignment import Alignment
from phylorl.phylo.models import ModelError, ModelSpec, SubstitutionModel, build_model
from phylorl.phylo.starts import MIN_BRANCH_LENGTH, random_tree
from phylorl.phylo.tree import Tree

TYPICAL_EXCHANGEABILITIES = (1.0, 3.0, 0.8, 0.8, 3.0, 1.0)  # centre of the log-normal draws: AC, AG, ..., GT
EXCHANGEABILITY_LOG_SD = 0.4
FREQ_CONCENTRATION = (10.0, 20.0)
ALPHA_RANGE = (0.2, 2.0)
PINV_PROBABILITY = 0.5
PINV_MAX = 0.3
GAMMA_CATEGORIES = 4
EXTERNAL_MEAN = 0.08  # mean terminal branch length (substitutions per site) before the per-tree scale
INTERNAL_MEAN = 0.04  # mean internal branch length, likewise
BRANCH_SHAPE = 1.5  # gamma shape of the branch lengths (1 would be exponential, with more near-zero branches)
TREE_SCALE_RANGE = (0.5, 2.0)  # the per-tree multiplier of both means is log-uniform in this range

_GAP = 15  # state mask for '-'


@dataclass(frozen=True)
class SimulatedDataset:
    """One simulated data set: what was generated and the truth it was generated from."""

    alignment: Alignment  # the simulated sequences, taxa t1..tN
    tree: Tree  # the true tree with its branch lengths (expected substitutions per site)
    model: str  # the fully specified IQ-TREE model string, e.g. GTR{..}+F{..}+I{..}+G4{..}


def random_model(rng: np.random.Generator) -> ModelSpec:
    """A fully specified GTR+F{..}+G4(+I) model drawn as described in the module docstring."""
    noise = np.exp(rng.normal(0.0, EXCHANGEABILITY_LOG_SD, size=6))
    rates = np.asarray(TYPICAL_EXCHANGEABILITIES) * noise
    rates = tuple(_round_sig(r / rates[5]) for r in rates[:5]) + (1.0,)
    freqs = _round_freqs(rng.dirichlet(np.full(4, rng.uniform(*FREQ_CONCENTRATION))))
    alpha = _round_sig(math.exp(rng.uniform(math.log(ALPHA_RANGE[0]), math.log(ALPHA_RANGE[1]))))
    invariant = bool(rng.random() < PINV_PROBABILITY)
    pinv = max(round(float(rng.uniform(0.0, PINV_MAX)), 4), 1e-4) if invariant else None
    return ModelSpec("GTR", rates, freqs, GAMMA_CATEGORIES, alpha, invariant, pinv)


def realistic_tree(taxa, rng: np.random.Generator) -> Tree:
    """A uniformly random unrooted topology with realistic branch lengths (see module docstring). ``taxa``: a
    sequence of names (at least 3) or anything with ``.taxa``. Lengths are raised to at least
    :data:`~phylorl.phylo.starts.MIN_BRANCH_LENGTH`."""
    tree = random_tree(taxa, rng)  # uniform topology; its exponential lengths are replaced below
    scale = math.exp(rng.uniform(math.log(TREE_SCALE_RANGE[0]), math.log(TREE_SCALE_RANGE[1])))
    internal = (tree.edges >= tree.n_leaves).all(axis=1)
    mean = np.where(internal, INTERNAL_MEAN, EXTERNAL_MEAN) * scale
    lengths = rng.gamma(BRANCH_SHAPE, mean / BRANCH_SHAPE)
    tree.lengths[:] = np.maximum(lengths, MIN_BRANCH_LENGTH)
    return tree


def simulate_alignment(
    tree: Tree, model: SubstitutionModel | ModelSpec, n_sites: int, rng: np.random.Generator
) -> Alignment:
    """Evolve ``n_sites`` independent sites down ``tree`` under ``model``. The tree is rooted at its first
    internal node (any node gives the same distribution, the models being reversible). Root states are drawn
    from ``model.freqs``; each site draws its rate class from the invariable class (probability ``pinv``, rate
    0) and the gamma categories (``model.weights``, rates ``model.rates``); each edge then draws the child's
    states from ``P(t)[class, parent state]``, vectorised over sites. Returns an :class:`Alignment` over
    ``tree.taxa`` with unambiguous bases only (state masks 1, 2, 4, 8)."""
    if isinstance(model, ModelSpec):
        model = _build_fixed(model)
    if isinstance(n_sites, bool) or not isinstance(n_sites, (int, np.integer)) or n_sites < 1:
        raise ValueError(f"n_sites must be an integer >= 1, got {n_sites!r}")
    n_sites = int(n_sites)
    class_probs = np.concatenate(([model.pinv], model.weights))  # class 0 = invariable
    class_probs = class_probs / class_probs.sum()
    site_class = rng.choice(len(class_probs), size=n_sites, p=class_probs)
    root = tree.n_leaves
    order, parent = tree.preorder(root)
    children = order[1:]
    slot = np.argmax(tree.neighbors[children] == parent[children, None], axis=1)
    lengths = tree.lengths[tree.node_edges[children, slot]]
    P = model.p_matrix(lengths)  # [n_nodes - 1, C, 4, 4], edge above each child in preorder
    identity = np.broadcast_to(np.eye(4), (len(children), 1, 4, 4))
    cumulative = np.cumsum(np.clip(np.concatenate((identity, P), axis=1), 0.0, None), axis=3)
    cumulative /= cumulative[..., -1:]
    thresholds = cumulative[..., :3].reshape(len(children), -1, 3)  # [n_nodes - 1, (1 + C) * 4, 3]
    uniforms = rng.random((len(children), n_sites))
    states = np.empty((tree.n_nodes, n_sites), dtype=np.int64)
    states[root] = rng.choice(4, size=n_sites, p=model.freqs)
    class_offset = site_class * 4
    for k, (v, p) in enumerate(zip(children.tolist(), parent[children].tolist())):
        rows = thresholds[k, class_offset + states[p]]  # [n_sites, 3]
        states[v] = (uniforms[k, :, None] >= rows).sum(axis=1)
    codes = np.left_shift(1, states[: tree.n_leaves]).astype(np.uint8)
    return Alignment(taxa=tree.taxa, codes=codes, source="<simulated>")


def add_gaps(alignment: Alignment, fraction: float, rng: np.random.Generator) -> Alignment:
    """A copy of ``alignment`` with each character independently replaced by a gap with probability
    ``fraction`` (in [0, 1)). Gaps count as missing data in the likelihood (as in IQ-TREE)."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"gap fraction must be in [0, 1), got {fraction!r}")
    if fraction == 0.0:
        return alignment
    mask = rng.random(alignment.codes.shape) < fraction
    codes = np.where(mask, _GAP, alignment.codes).astype(np.uint8)
    return Alignment(taxa=alignment.taxa, codes=codes, source=alignment.source)


def dataset_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of data set ``index`` of a corpus simulated with ``seed``: an independent stream
    per data set (``SeedSequence(seed).spawn``), so data set ``i`` does not depend on how many follow."""
    for name, value in (("seed", seed), ("index", index)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(index),)))


def simulate_dataset(
    n_taxa: int, n_sites: int, rng: np.random.Generator, *, model: ModelSpec | None = None, gap_fraction=0.0
) -> SimulatedDataset:
    """Draw a model (unless ``model`` is given), a realistic tree over taxa ``t1..t{n_taxa}``, an
    alignment of ``n_sites`` sites along it, and gaps (``gap_fraction``), in that order from ``rng``.

    ``model`` must be fully specified with fixed or equal frequencies (``+F{..}`` or ``+FQ``): a
    simulation has no alignment to take empirical frequencies from.
    """
    if isinstance(n_taxa, bool) or not isinstance(n_taxa, (int, np.integer)) or n_taxa < 3:
        raise ValueError(f"n_taxa must be an integer >= 3, got {n_taxa!r}")
    spec = random_model(rng) if model is None else model
    substitution_model = _build_fixed(spec)
    tree = realistic_tree([f"t{i}" for i in range(1, int(n_taxa) + 1)], rng)
    alignment = add_gaps(simulate_alignment(tree, substitution_model, n_sites, rng), gap_fraction, rng)
    return SimulatedDataset(alignment=alignment, tree=tree, model=str(spec))


def check_simulation_model(spec: ModelSpec) -> None:
    """Raise :class:`ModelError` unless ``spec`` can drive a simulation (see :func:`simulate_dataset`)."""
    if spec.free_parameters:
        raise ModelError(
            f"model {str(spec)!r} is not fully specified: give numbers for {', '.join(spec.free_parameters)} "
            "(e.g. 'GTR{1,3,0.8,0.8,3}+F{0.3,0.2,0.2,0.3}+I{0.1}+G4{0.5}')"
        )
    if spec.freqs == "empirical":
        raise ModelError(
            f"model {str(spec)!r} uses empirical frequencies (+F), which a simulation cannot take from data: "
            "give +F{pA,pC,pG,pT} or +FQ"
        )


def _build_fixed(spec: ModelSpec) -> SubstitutionModel:
    check_simulation_model(spec)
    return build_model(spec)


def _round_sig(x: float, digits: int = 4) -> float:
    return float(f"{float(x):.{digits}g}")


def _round_freqs(freqs: np.ndarray) -> tuple[float, float, float, float]:
    """Round to 4 decimals (each at least 0.01), the last taking the remainder, summing to 1."""
    first = [max(round(float(p), 4), 0.01) for p in freqs[:3]]
    last = round(1.0 - sum(first), 4)
    if last < 0.01:  # practically impossible with Dirichlet(>=10): fall back to equal frequencies
        return (0.25, 0.25, 0.25, 0.25)
    return (first[0], first[1], first[2], last)
