"""Phylogenetics core: alignments, trees, SPR moves, substitution models and the likelihood engine.

The public API used by tools outside the package::

    from phylorl.phylo import load_alignment, parse_model, read_newick, LikelihoodEngine
    aln = load_alignment("DS1.fasta")
    LikelihoodEngine(aln, parse_model("GTR+F+G4")).loglik(read_newick("tree.nwk", aln))
"""

from .alignment import Alignment, AlignmentError, format_fasta, format_phylip, load_alignment, parse_alignment
from .likelihood import LikelihoodEngine
from .models import ModelError, ModelSpec, build_model, parse_model
from .newick import TreeError, read_newick, write_newick
from .splits import rf_distance, topology_hash
from .spr import apply_spr, enumerate_moves, move_metadata, spr_neighbor
from .starts import nj_tree, random_tree
from .tree import Tree, edges_near

__all__ = [
    "Alignment",
    "AlignmentError",
    "format_fasta",
    "format_phylip",
    "load_alignment",
    "parse_alignment",
    "LikelihoodEngine",
    "ModelError",
    "ModelSpec",
    "build_model",
    "parse_model",
    "TreeError",
    "read_newick",
    "write_newick",
    "rf_distance",
    "topology_hash",
    "apply_spr",
    "enumerate_moves",
    "move_metadata",
    "spr_neighbor",
    "nj_tree",
    "random_tree",
    "edges_near",
    "Tree",
]
