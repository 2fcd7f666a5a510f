"""The learner's prefetcher: batches sampled on threads, on the device in order, errors handed on."""

import numpy as np
import pytest
import torch
from helpers import batch_of

from phylorl.agent.prefetch import Prefetcher
from phylorl.nets.synthetic import random_transition


def transitions(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [random_transition(n, rng, next_taxa=n + 1) for n in sizes]


def test_prefetcher_hands_out_collated_batches_in_order():
    pool = transitions([5, 6, 7, 5, 6, 7], seed=1)
    calls = iter(range(100))

    def sample():
        i = next(calls)
        if i == 0:
            return None  # no data yet: the prefetcher waits and asks again
        j = (i - 1) % 3
        return batch_of(pool[2 * j : 2 * j + 2], np.full(2, 0.5, np.float32), compact=True), ("keys", j)

    with Prefetcher(sample, depth=2, idle_wait_s=0.001) as pf:
        for j in range(3):
            batch, info = pf.get(timeout=30)
            assert info == ("keys", j)
            want = batch_of(pool[2 * j : 2 * j + 2], weights=np.full(2, 0.5, np.float32))
            assert torch.equal(batch.next_actions.nodes, want.next_actions.nodes)
            assert torch.equal(batch.graphs.neighbors, want.graphs.neighbors)
            assert batch.weights.tolist() == [0.5, 0.5]
    assert not any(t.is_alive() for t in pf._threads)


def test_prefetcher_reraises_sampling_errors_and_closes():
    def sample():
        raise KeyError("replay unavailable")

    pf = Prefetcher(sample)
    with pytest.raises(RuntimeError, match="sampling thread failed") as info:
        pf.get(timeout=30)
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(RuntimeError, match="sampling thread failed"):
        pf.get(timeout=1)
    pf.close()
    assert not any(t.is_alive() for t in pf._threads)


def test_prefetcher_with_several_workers_hands_out_every_batch_once():
    import threading

    pool = transitions([5, 6, 7, 8], seed=2)
    lock = threading.Lock()
    drawn = []

    def sample():  # thread-safe, as the workers call it at once
        with lock:
            i = len(drawn)
            drawn.append(i)
        return batch_of([pool[i % 4]], compact=True), i

    with Prefetcher(sample, depth=2, workers=3) as pf:
        assert len(pf._threads) == 3
        got = [pf.get(timeout=30)[1] for _ in range(12)]
    assert len(set(got)) == 12  # no batch handed out twice
    assert set(got) <= set(drawn)
    assert not any(t.is_alive() for t in pf._threads)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        Prefetcher(sample, workers=0)


def test_prefetcher_get_times_out_when_no_data():
    with Prefetcher(lambda: None, idle_wait_s=0.001) as pf, pytest.raises(TimeoutError):
        pf.get(timeout=0.05)
    assert not any(t.is_alive() for t in pf._threads)


def test_a_batch_marks_labels_and_bootstrapping_on_the_host():
    rng = np.random.default_rng(0)
    trs = [random_transition(5, rng) for _ in range(3)]
    plain = batch_of(trs)
    assert plain.bootstraps and not plain.any_labelled and not plain.next_labelled.any()
    for t in trs:
        t.discount = 0.0
    trs[1].next_labels = np.zeros(trs[1].next_obs.n_actions, dtype=np.float32)
    marked = batch_of(trs)
    assert not marked.bootstraps and marked.any_labelled
    assert marked.next_labelled.tolist() == [False, True, False]
