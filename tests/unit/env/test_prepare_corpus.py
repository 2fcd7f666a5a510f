"""``prepare_corpus``: a corpus prepared once into a cache, in processes; a stop keeps the rest from
starting."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from phylorl.env.prepare import PreparationCache, prepare_corpus
from phylorl.phylo import format_fasta, load_alignment, parse_model
from phylorl.phylo.simulate import simulate_dataset


@pytest.fixture
def corpus(tmp_path):
    paths = []
    for i in range(6):
        path = tmp_path / f"a{i}.fasta"
        path.write_text(
            format_fasta(simulate_dataset(6, 60, np.random.default_rng(i), model=parse_model("JC")).alignment)
        )
        paths.append(path)
    return paths


def cached(paths, directory) -> int:
    cache = PreparationCache(directory)
    return sum(cache.has(load_alignment(p), "JC") for p in paths)


@pytest.mark.parametrize("threads", [1, 2])
def test_every_alignment_is_prepared_once_and_counted(corpus, tmp_path, threads):
    seen = []
    assert prepare_corpus(
        corpus,
        "JC",
        tmp_path / "cache",
        threads=threads,
        on_done=lambda path, done, total: seen.append((path, done, total)),
    )
    # each once, in the order they finish
    assert sorted(path for path, _, _ in seen) == sorted(map(str, corpus))
    assert [(done, total) for _, done, total in seen] == [(i + 1, 6) for i in range(6)]
    assert cached(corpus, tmp_path / "cache") == 6
    again = []
    assert prepare_corpus(
        corpus, "JC", tmp_path / "cache", threads=threads, on_done=lambda *a: again.append(a)
    )
    assert again == []  # all cached: nothing prepared again


@pytest.mark.parametrize("threads", [1, 2])
def test_without_a_listener_too(corpus, tmp_path, threads):
    assert prepare_corpus(corpus, "JC", tmp_path / "cache", threads=threads)
    assert cached(corpus, tmp_path / "cache") == 6


@pytest.mark.parametrize("threads", [1, 2])
def test_a_stop_starts_no_more_alignments(corpus, tmp_path, threads):
    """Set after the first alignment is done: what was under way finishes (at most one per process), nothing
    else starts, and the call says it did not prepare them all."""
    stop = threading.Event()
    assert not prepare_corpus(
        corpus, "JC", tmp_path / "cache", threads=threads, on_done=lambda *_: stop.set(), stop=stop
    )
    assert 1 <= cached(corpus, tmp_path / "cache") <= threads
