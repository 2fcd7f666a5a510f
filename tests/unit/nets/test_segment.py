import math

import pytest
import torch

from phylorl.nets.segment import (
    segment_argmax,
    segment_log_softmax,
    segment_logsumexp,
    segment_max,
    segment_mean,
    segment_sum,
    segments_from_sizes,
)

X = torch.tensor([1.0, 2.0, 0.0, 0.0, math.log(2.0)])
SEG = segments_from_sizes(torch.tensor([2, 3]))  # states of 2 and 3 actions


def test_sum_mean_max_by_hand():
    assert segment_sum(X, SEG).tolist() == pytest.approx([3.0, math.log(2.0)])
    assert segment_mean(X, SEG).tolist() == pytest.approx([1.5, math.log(2.0) / 3])
    assert segment_max(X, SEG).tolist() == pytest.approx([2.0, math.log(2.0)])


def test_logsumexp_by_hand():
    # log(e + e^2) and log(1 + 1 + 2) = log 4
    assert segment_logsumexp(X, SEG).tolist() == pytest.approx([math.log(math.e + math.e**2), math.log(4.0)])


def test_logsumexp_is_stable_for_large_values():
    out = segment_logsumexp(X + 1000.0, SEG)
    assert out.tolist() == pytest.approx([1000 + math.log(math.e + math.e**2), 1000 + math.log(4.0)])


def test_empty_segment():
    seg = segments_from_sizes(torch.tensor([2, 0, 3]))
    assert segment_sum(X, seg)[1] == 0
    assert segment_logsumexp(X, seg)[1] == float("-inf")
    assert segment_max(X, seg)[1] == float("-inf")


def test_log_softmax_and_argmax():
    log_p = segment_log_softmax(X, SEG)
    assert log_p.exp().tolist() == pytest.approx([1 / (1 + math.e), math.e / (1 + math.e), 0.25, 0.25, 0.5])
    ties = torch.tensor([5.0, 5.0, 1.0, 3.0, 3.0])
    assert segment_argmax(ties, SEG).tolist() == [0, 1]  # first maximum within each segment
    assert segment_argmax(X, SEG).tolist() == [1, 2]


def test_uniform_and_scatter_paths_agree():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, generator=gen)
    sizes = torch.tensor([4, 4, 4])
    uniform, scatter = segments_from_sizes(sizes, size=4), segments_from_sizes(sizes)
    for f in (segment_sum, segment_mean, segment_max):
        torch.testing.assert_close(f(x, uniform), f(x, scatter))
    v = x[:, 0]
    torch.testing.assert_close(segment_logsumexp(v, uniform), segment_logsumexp(v, scatter))
    torch.testing.assert_close(segment_log_softmax(v, uniform), segment_log_softmax(v, scatter))
    assert segment_argmax(v, uniform).tolist() == segment_argmax(v, scatter).tolist()
