"""Phylogenetics core: alignments, trees, SPR moves, substitution models and the likelihood engine.

The public API used by tools outside the package::

    from phylorl.phylo import load_alignment, parse_model, read_newick, LikelihoodEngine
    aln = load_alignment("DS1.fasta")
    LikelihoodEngine(aln, parse_model("GTR+F+G4")).loglik(read_newick("tree.nwk", aln))
"""

from .alignment import (
    Alignment,
    AlignmentError,
    SitePatterns,
    format_fasta,
    format_phylip,
    load_alignment,
    parse_alignment,
)
from .likelihood import LikelihoodEngine
from .models import ModelError, ModelSpec, SubstitutionModel, build_model, gamma_rates, parse_model
from .newick import TreeError, read_newick, write_newick
from .splits import rf_distance, splits, topology_hash
from .spr import apply_spr, enumerate_moves, move_metadata, spr_neighbor
from .starts import jc_distances, nj_tree, random_tree
from .traversal import edge_walk, edges_near
from .tree import Tree

__all__ = [
    "Alignment",
    "AlignmentError",
    "SitePatterns",
    "format_fasta",
    "format_phylip",
    "load_alignment",
    "parse_alignment",
    "LikelihoodEngine",
    "ModelError",
    "ModelSpec",
    "SubstitutionModel",
    "build_model",
    "gamma_rates",
    "parse_model",
    "TreeError",
    "read_newick",
    "write_newick",
    "rf_distance",
    "splits",
    "topology_hash",
    "apply_spr",
    "enumerate_moves",
    "move_metadata",
    "spr_neighbor",
    "jc_distances",
    "nj_tree",
    "random_tree",
    "edge_walk",
    "edges_near",
    "Tree",
]
