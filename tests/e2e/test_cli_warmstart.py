"""``phylorl warmstart`` end to end, in real child processes: label the moves of the states searches visit in
worker processes, fit the twin networks in rounds (the second following the agent the first fitted), write a
learner checkpoint that ``phylorl search --policy agent`` then reads."""

from __future__ import annotations

import json

import numpy as np
from helpers import phylorl_cli

from phylorl.phylo import format_fasta, parse_model
from phylorl.phylo.simulate import simulate_dataset

TAXA = 7
# every SPR move of a 7-taxon tree (56): a random choice agrees 1 in 56
MOVES = 2 * (TAXA - 3) * (2 * TAXA - 7)


def test_warmstart_fits_an_agent_in_rounds_that_agrees_with_greedy_and_search_reads(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        data = simulate_dataset(TAXA, 400, np.random.default_rng(i), model=parse_model("JC"))
        (corpus / f"a{i}.fasta").write_text(format_fasta(data.alignment))
    out, cache = tmp_path / "ws.pt", tmp_path / "cache"
    proc = phylorl_cli(
        "warmstart",
        "--alignments",
        corpus,
        "--out",
        out,
        "--minutes",
        0.08,
        "--rounds",
        2,
        "--threads",
        2,
        "--epochs",
        4,
        "--hidden",
        16,
        "--model",
        "JC",
        "--cache-dir",
        cache,
        "--seed",
        0,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["checkpoint"] == str(out) and out.is_file() and result["alignments"] == 3
    first, second = result["rounds"]
    assert first["new_states"] > 0 and second["new_states"] > 0  # the second round followed the first's agent
    assert second["states"] == first["states"] + second["new_states"] == result["states"]  # and refit on all
    for r in (first, second):
        losses = [epoch["loss"] for epoch in r["history"]]
        assert len(losses) == 4 and losses[-1] < losses[0], losses
    # held out (every 20th state): the fitted agent's best move is likelihood-greedy's far more often than
    # chance
    assert result["holdout_top1"] > 5 / MOVES, result["holdout_top1"]
    # the progress went to a pipe: lines of their own, not a redrawn line
    assert "\r" not in proc.stderr and "warmstart: round 2:" in proc.stderr

    search = phylorl_cli(
        "search",
        "--alignments",
        corpus / "a0.fasta",
        "--policy",
        "agent",
        "--checkpoint",
        out,
        "--model",
        "JC",
        "--cache-dir",
        cache,
        "--start",
        "random",
        "--seed",
        1,
        "--json",
    )
    assert search.returncode == 0, search.stderr[-3000:]
    found = json.loads(search.stdout)
    assert found["steps"] > 0 and found["best_loglik"] > found["start_loglik"]
