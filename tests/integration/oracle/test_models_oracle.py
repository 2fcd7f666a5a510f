"""Substitution models against IQ-TREE 2 (``iqtree2``, through the ``iqtree_fixed`` fixture): each model
string evaluated with fixed parameters on DS1 and its reference tree (a few hundredths of a second per
run); frequencies, exchangeabilities, rate matrices, rate categories and the log-likelihood printed in its
``.iqtree`` report against ours."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from phylorl.phylo.models import SubstitutionModel, build_model, parse_model

GTR_DS1 = "GTR{0.6472,1.0289,0.6175,1.8389,3.3278}+F{0.2341,0.2567,0.2799,0.2293}"

ORACLE_MODELS = [
    "JC",
    "K80{2}",
    "F81",
    "HKY{2}",
    "GTR{1,2,1,1,2}",
    "GTR{2,4,6,8,10,2}+FQ",
    "HKY{2}+F{0.2,0.3,0.3,0.2}",
    "JC+G8{0.5}",
    "JC+I{0.3}",
    "JC+G4{0.02}",
    "K80{2}+G4{2000}",
    "F81+G2{0.5}",
    GTR_DS1 + "+I{0.2}+G4{0.5}",
    "HKY{3}+F{0.1,0.2,0.3,0.4}+I{0.05}+G6{1.7}",
]
FREQ_MODE = {
    "equal frequencies": "equal",
    "empirical counts from alignment": "empirical",
    "user-defined": "fixed",
}


@pytest.fixture(scope="module")
def iqtree_reports(iqtree_fixed, ds_dir) -> dict[str, str]:
    """Each ORACLE_MODELS string evaluated by IQ-TREE on DS1's reference tree: model -> .iqtree text."""
    newick = (ds_dir / "reference" / "DS1.GTR_G4.treefile").read_text()
    return {m: iqtree_fixed(ds_dir / "DS1.fasta", newick, m).report for m in ORACLE_MODELS}


def _section(report: str) -> str:
    return report[report.index("SUBSTITUTION PROCESS") : report.index("USER TREE")]


def _g4(x: float) -> str:
    """Format as C++ streams print doubles at IQ-TREE's precision 4 (same as C's %.4g)."""
    return f"{x:.4g}"


@pytest.mark.parametrize("model_string", ORACLE_MODELS)
def test_frequencies_and_exchangeabilities_match_iqtree(iqtree_reports, model_string):
    text = _section(iqtree_reports[model_string])
    spec = parse_model(model_string)
    mode = FREQ_MODE[re.search(r"State frequencies: \((.*)\)", text).group(1)]
    assert mode == ("fixed" if isinstance(spec.freqs, tuple) else spec.freqs)
    rates = dict(re.findall(r"^  ([ACGT]-[ACGT]): (\S+)$", text, re.M))
    for pair, value in zip(("A-C", "A-G", "A-T", "C-G", "C-T", "G-T"), spec.exchangeabilities):
        assert float(rates[pair]) == pytest.approx(value, abs=5e-5)
    if isinstance(spec.freqs, tuple):
        printed = [p for _, p in re.findall(r"pi\(([ACGT])\) = (\S+)", text)]
        assert printed == [_g4(p) for p in spec.freqs]


FIXED_FREQ_MODELS = [m for m in ORACLE_MODELS if "+F{" in m or "+FQ" in m or m[:2] in ("JC", "K8")]


@pytest.mark.parametrize("model_string", FIXED_FREQ_MODELS)
def test_rate_matrix_matches_iqtree(iqtree_reports, model_string):
    text = _section(iqtree_reports[model_string])
    block = text[text.index("Rate matrix Q:") :].splitlines()[2:6]
    printed = [line.split()[1:] for line in block]
    model = build_model(parse_model(model_string))
    assert printed == [[_g4(q) for q in row] for row in model.Q]


@pytest.mark.parametrize("model_string", [m for m in ORACLE_MODELS if "+G" in m or "+I" in m])
def test_rate_categories_match_iqtree(iqtree_reports, model_string):
    """IQ-TREE's "Category Relative_rate Proportion" table, to the printed digits; with +I the gamma
    rates are divided by (1 - pinv) and category 0 is the invariable class."""
    text = _section(iqtree_reports[model_string])
    table = re.findall(r"^  (\d+)\s+(\S+)\s+(\S+)$", text, re.M)
    spec = parse_model(model_string)
    empirical = np.array([0.2341, 0.2567, 0.2799, 0.2293]) if spec.freqs == "empirical" else None
    model = build_model(spec, empirical_freqs=empirical)
    ours = [(str(c + 1), _g4(r), _g4(w)) for c, (r, w) in enumerate(zip(model.rates, model.weights))]
    if spec.invariant:
        ours = [("0", "0", _g4(model.pinv))] + ours
    assert table == ours


def _reference_loglik(model: SubstitutionModel, newick_path: Path, fasta_path: Path) -> float:
    """Plain Felsenstein pruning over all sites (gaps/?/N as 'any state'), written for this check only:
    with +I a site adds pinv * pi[x] when every sequence is compatible with state x."""
    import dendropy

    names, rows = [], []
    for block in fasta_path.read_text().split(">")[1:]:
        head, *body = block.splitlines()
        names.append(head.strip())
        rows.append(list("".join(body).upper()))
    chars = np.array(rows)  # [taxa, sites]
    tips = {
        name: np.stack([(chars[i] == b) | ~np.isin(chars[i], list("ACGT")) for b in "ACGT"], -1).astype(float)
        for i, name in enumerate(names)
    }  # name -> [sites, 4]
    tree = dendropy.Tree.get(path=str(newick_path), schema="newick", preserve_underscores=True)
    partial = {}
    for node in tree.postorder_node_iter():
        if node.is_leaf():
            partial[node] = np.broadcast_to(
                tips[node.taxon.label], (len(model.rates),) + tips[names[0]].shape
            )
            continue
        partial[node] = np.prod(
            [
                np.einsum("cij,csj->csi", model.p_matrix(child.edge.length or 0.0), partial.pop(child))
                for child in node.child_nodes()
            ],
            axis=0,
        )
    site = np.einsum("c,csi,i->s", model.weights, partial[tree.seed_node], model.freqs)
    compatible = np.all(np.stack(list(tips.values())), axis=0)  # [sites, 4]
    return float(np.log(site + model.pinv * compatible @ model.freqs).sum())


@pytest.mark.parametrize("model_string", FIXED_FREQ_MODELS)
def test_model_reproduces_iqtree_loglik(iqtree_reports, ds_dir, model_string):
    """The model's numbers (freqs, Q, category rates and weights, pinv) give IQ-TREE's log-likelihood."""
    printed = float(re.search(r"Log-likelihood of the tree: (\S+)", iqtree_reports[model_string]).group(1))
    model = build_model(parse_model(model_string))
    tree = ds_dir / "reference" / "DS1.GTR_G4.treefile"
    assert _reference_loglik(model, tree, ds_dir / "DS1.fasta") == pytest.approx(printed, abs=6e-5)
