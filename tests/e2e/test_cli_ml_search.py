"""``phylorl search`` (the ML search, the default policy) as a user runs it: progress on stderr, the tree and
its checkpoint file written, ``--resume`` from the checkpoint ending on the same answer, and ``phylorl
eval``'s ``ml`` method against IQ-TREE from the NJ start. Real child processes, real IQ-TREE."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import phylorl_cli

from phylorl.phylo import LikelihoodEngine, load_alignment, read_newick, rf_distance

REPO = Path(__file__).resolve().parents[2]
DS1 = REPO / "examples" / "DS1.fasta"


def test_ml_search_writes_tree_and_checkpoint_and_resumes_to_the_same_answer(tmp_path):
    out = tmp_path / "ds1.nwk"
    first = phylorl_cli(
        "search", "--alignment", DS1, "--out", out, "--json", "--starts", "2", "--threads", "2"
    )
    assert first.returncode == 0, first.stderr[-2000:]
    summary = json.loads(first.stdout)
    assert "round" in first.stderr and "logL" in first.stderr  # progress lines
    assert "preparing" in first.stderr and "model fit round 1" in first.stderr  # and of the preparation
    checkpoint = Path(f"{out}.ckpt.json")
    assert summary["checkpoint_file"] == str(checkpoint) and checkpoint.is_file()
    alignment = load_alignment(DS1)
    tree = read_newick(out.read_text(), taxa=alignment.taxa)
    engine = LikelihoodEngine(alignment, summary["model"])
    assert abs(engine.loglik(tree) - summary["best_loglik"]) < 1e-3  # the written tree is the answer
    assert summary["best_loglik"] > summary["start_loglik"] + 1.0
    assert summary["threads"] == 2 and "2 processes" in first.stderr
    again = phylorl_cli(
        "search", "--alignment", DS1, "--out", out, "--json", "--starts", "2", "--threads", "2", "--resume"
    )
    assert again.returncode == 0, again.stderr[-2000:]
    resumed = json.loads(again.stdout)
    assert "preparing" not in again.stderr  # a resumed search goes straight on
    assert resumed["best_loglik"] == summary["best_loglik"] and resumed["tree"] == summary["tree"]
    other = phylorl_cli("search", "--alignment", DS1, "--out", out, "--starts", "2", "--resume")
    # a checkpoint of other settings (threads)
    assert other.returncode == 2 and "another search" in other.stderr


def test_eval_ml_method_from_nj_against_iqtree(tmp_path):
    report = tmp_path / "eval.json"
    proc = phylorl_cli(
        "eval",
        "--alignments",
        DS1,
        "--methods",
        "ml,iqtree",
        "--starts",
        "1",
        "--start",
        "nj",
        "--json",
        report,
        "--cache-dir",
        tmp_path / "cache",
        "--seed",
        "1",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(report.read_text())
    rows = {r["method"]: r for r in data["rows"]}
    assert data["settings"]["start"] == "nj"
    assert rows["ml"]["start_loglik"] == rows["iqtree"]["start_loglik"]
    assert rows["ml"]["final_loglik"] >= rows["iqtree"]["final_loglik"] - 0.5
    assert (
        rf_distance(
            read_newick(rows["ml"]["tree"], load_alignment(DS1).taxa),
            read_newick(rows["iqtree"]["tree"], load_alignment(DS1).taxa),
        )
        <= 4
    )
    assert set(data["by_band"]) == {"4-29"} and data["by_band"]["4-29"]["ml"]["runs"] == 1
    assert data["by_band"]["4-29"]["ml"]["fraction_within_tolerance"] == float(rows["ml"]["within_tolerance"])
