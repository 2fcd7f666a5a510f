import numpy as np
import pytest
import torch

from phylorl.agent.batch import Prefetcher, collate
from phylorl.nets.synthetic import random_transition


def transitions(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [random_transition(n, rng, next_taxa=n + 1) for n in sizes]


def test_collate_round_trip():
    trs = transitions([5, 8, 4, 6])
    trs[1].terminal, trs[1].truncated = False, True
    trs[2].terminal, trs[2].truncated = True, False
    w = np.array([1.0, 0.5, 0.25, 2.0], dtype=np.float32)
    b = collate(trs, weights=w)
    assert b.size == 4
    assert b.reward.tolist() == pytest.approx([t.reward for t in trs])
    assert b.discount.tolist() == pytest.approx([t.discount for t in trs])
    assert b.terminal.tolist()[1:3] == [False, True]  # truncated is not terminal
    assert b.weights.tolist() == w.tolist()
    for i, t in enumerate(trs):
        for graphs, obs in ((b.graphs, t.obs), (b.next_graphs, t.next_obs)):
            lo = int(graphs.node_offset[i])
            hi = lo + obs.n_nodes
            np.testing.assert_array_equal(graphs.x[lo:hi].numpy(), obs.node_features)
            in_tree = (graphs.edge_index[0] >= lo) & (graphs.edge_index[0] < hi)
            np.testing.assert_array_equal(graphs.edge_index[:, in_tree].numpy() - lo, obs.edge_index)
            np.testing.assert_array_equal(graphs.edge_attr[in_tree].numpy(), obs.edge_attr)
        # the chosen action of s, all actions of s'
        chosen = b.actions.nodes[i].numpy() - int(b.graphs.node_offset[i])
        np.testing.assert_array_equal(chosen, t.obs.actions[t.action])
        np.testing.assert_array_equal(b.actions.meta[i].numpy(), t.obs.action_meta[t.action])
        mine = b.next_actions.states.index == i
        np.testing.assert_array_equal(b.next_actions.nodes[mine].numpy() - int(b.next_graphs.node_offset[i]),
                                      t.next_obs.actions)
        np.testing.assert_array_equal(b.next_actions.meta[mine].numpy(), t.next_obs.action_meta)
    assert b.actions.states.size == 1


def test_collate_rejects_bad_transitions():
    trs = transitions([5, 5])
    trs[0].action = trs[0].obs.n_actions
    with pytest.raises(ValueError, match="action .* outside"):
        collate(trs)
    trs = transitions([5, 5])
    with pytest.raises(ValueError, match="weights"):
        collate(trs, weights=np.ones(3))
    nxt = trs[0].next_obs
    trs[0].next_obs = type(nxt)(nxt.node_features, nxt.edge_index, nxt.edge_attr, nxt.actions[:0], nxt.action_meta[:0])
    trs[0].terminal = False
    with pytest.raises(ValueError, match="no actions but is not terminal"):
        collate(trs)


def test_prefetcher_hands_out_collated_batches_in_order():
    pool = transitions([5, 6, 7, 5, 6, 7], seed=1)
    calls = iter(range(100))

    def sample():
        i = next(calls)
        if i == 0:
            return None  # no data yet: the prefetcher waits and asks again
        j = (i - 1) % 3
        return pool[2 * j: 2 * j + 2], np.full(2, 0.5, np.float32), ("keys", j)

    with Prefetcher(sample, depth=2, idle_wait_s=0.001) as pf:
        for j in range(3):
            batch, info = pf.get(timeout=30)
            assert info == ("keys", j)
            want = collate(pool[2 * j: 2 * j + 2], weights=np.full(2, 0.5, np.float32))
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
        return [pool[i % 4]], np.ones(1, np.float32), i

    with Prefetcher(sample, depth=2, workers=3) as pf:
        assert len(pf._threads) == 3
        got = [pf.get(timeout=30)[1] for _ in range(12)]
    assert len(set(got)) == 12  # no batch handed out twice
    assert set(got) <= set(drawn)
    assert not any(t.is_alive() for t in pf._threads)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        Prefetcher(sample, workers=0)


def test_prefetcher_get_times_out_when_no_data():
    with Prefetcher(lambda: None, idle_wait_s=0.001) as pf:
        with pytest.raises(TimeoutError):
            pf.get(timeout=0.05)
    assert not any(t.is_alive() for t in pf._threads)


def test_collate_marks_labels_and_bootstrapping_on_the_host():
    rng = np.random.default_rng(0)
    trs = [random_transition(5, rng) for _ in range(3)]
    plain = collate(trs)
    assert plain.bootstraps and not plain.any_labelled and not plain.next_labelled.any()
    for t in trs:
        t.discount = 0.0
    trs[1].next_labels = np.zeros(trs[1].next_obs.n_actions, dtype=np.float32)
    marked = collate(trs)
    assert not marked.bootstraps and marked.any_labelled
    assert marked.next_labelled.tolist() == [False, True, False]
