"""The likelihood engine against a live IQ-TREE 2 (``iqtree2``, through the ``iqtree_fixed`` fixture): random
trees on a copy of DS1 with ambiguity codes, under several models, with fixed branch lengths."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.phylo import (
    LikelihoodEngine,
    load_alignment,
    parse_model,
    random_tree,
    read_newick,
    write_newick,
)
from phylorl.phylo.alignment import STATE_MASKS


def _ambiguous_copy(path, tmp_path, rng):
    """DS1 with 2% of the characters replaced by IUPAC ambiguity codes (a file IQ-TREE reads too)."""
    aln = load_alignment(path)
    codes = aln.codes.copy()
    hit = rng.random(codes.shape) < 0.02
    choices = np.array([STATE_MASKS[c] for c in "RYSWKMBDHVN"], dtype=np.uint8)
    codes[hit] = rng.choice(choices, size=int(hit.sum()))
    letters = {v: k for k, v in STATE_MASKS.items() if k in "ACGTRYSWKMBDHVN"}
    out = tmp_path / "ambiguous.fasta"
    out.write_text(
        "".join(f">{t}\n{''.join(letters[int(c)] for c in row)}\n" for t, row in zip(aln.taxa, codes))
    )
    return out


@pytest.mark.parametrize(
    "model_string",
    [
        "JC",
        "HKY{3.1}+F",
        "HKY{2.2}+F{0.3,0.2,0.25,0.25}+I{0.3}",
        "GTR{0.6,2.1,0.5,1.4,3.3}+F+I{0.2}+G4{0.7}",
        "K80{2.5}+G4{0.3}",
    ],
)
def test_random_trees_match_live_iqtree(ds_dir, iqtree_fixed, tmp_path, model_string):
    rng = np.random.default_rng(abs(hash(model_string)) % 2**32)
    path = _ambiguous_copy(ds_dir / "DS1.fasta", tmp_path, rng)
    aln = load_alignment(path)
    tree = random_tree(aln.taxa, rng, mean_length=0.08)
    tree.lengths[:] = np.round(tree.lengths, 6) + 1e-5  # exactly representable in the Newick we hand over
    newick = write_newick(tree)
    ours = LikelihoodEngine(aln, parse_model(model_string)).loglik(read_newick(newick, aln))
    theirs = iqtree_fixed(path, newick, model_string).loglik
    assert abs(ours - theirs) <= 2e-3  # IQ-TREE prints 4 decimals
