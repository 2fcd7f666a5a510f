"""Scores against IQ-TREE (the improvement formula and its < 1-unit rule) and their summaries."""

from __future__ import annotations

import pytest

from phylorl.evaluation.metrics import (
    MIN_GAIN,
    TOLERANCE,
    StartResult,
    by_taxon_count,
    improvement,
    mean_curve,
    normalised_trajectory,
    summarise,
    within,
)


def test_improvement_is_the_fraction_of_iqtree_gain():
    assert improvement(-110.0, -105.0, -100.0) == pytest.approx(0.5)
    assert improvement(-110.0, -110.0, -100.0) == 0.0
    assert improvement(-110.0, -100.0, -100.0) == 1.0
    assert improvement(-110.0, -98.0, -100.0) == pytest.approx(1.2)  # beating IQ-TREE scores above 1
    assert improvement(-110.0, -112.0, -100.0) == pytest.approx(-0.2)
    assert improvement(-110.0, -105.0, None) is None  # no reference: undefined


def test_improvement_when_iqtree_gains_less_than_one_unit_is_zero_or_one():
    assert MIN_GAIN == 1.0 and TOLERANCE == 0.1
    start, iq = -100.5, -100.0  # IQ-TREE gains 0.5 < 1: no ratio
    assert improvement(start, -100.05, iq) == 1.0  # within 0.1
    assert improvement(start, -100.1, iq) == 1.0  # exactly 0.1 below still counts
    assert improvement(start, -100.2, iq) == 0.0
    assert improvement(start, start, iq) == 0.0
    assert improvement(-99.0, -99.0, iq) == 1.0  # a start better than IQ-TREE (negative gain)
    assert improvement(-99.0, -101.0, iq) == 0.0
    # a gain of exactly 1 uses the ratio
    assert improvement(-101.0, -100.5, -100.0) == pytest.approx(0.5)


def test_within_tolerance():
    assert within(-100.09, -100.0) is True
    assert within(-100.11, -100.0) is False
    assert within(-90.0, -100.0) is True
    assert within(-100.0, None) is None


def row(alignment, n, start, method, s, f, ref, seconds=1.0, evaluations=10, trajectory=()):
    return StartResult(
        alignment=alignment,
        n_taxa=n,
        start=start,
        method=method,
        start_loglik=s,
        final_loglik=f,
        iqtree_loglik=ref,
        improvement=improvement(s, f, ref),
        within_tolerance=within(f, ref),
        rf=None,
        rf_normalised=None,
        evaluations=evaluations,
        steps=len(trajectory),
        seconds=seconds,
        trajectory=list(trajectory),
    )


def test_summary_aggregates_over_starts_and_alignments():
    rows = [
        # alignment a (7 taxa), IQ-TREE -100: starts at -110 and -120
        row("a", 7, 0, "m", -110.0, -105.0, -100.0, seconds=1.0),  # 0.5
        row("a", 7, 1, "m", -120.0, -100.0, -100.0, seconds=3.0),  # 1.0, within
        # alignment b (9 taxa), IQ-TREE -50
        row("b", 9, 0, "m", -60.0, -58.0, -50.0, seconds=2.0),  # 0.2
        row("b", 9, 1, "m", -50.5, -50.05, -50.0, seconds=2.0),  # gain 0.5 < 1, within: 1.0
        row("a", 7, 0, "other", -110.0, -110.0, -100.0, evaluations=None),
    ]
    summary = summarise(rows, ["m", "other", "missing"], iqtree_seconds=[4.0, 0.0])
    assert [s.method for s in summary] == ["m", "other"]  # methods without rows are left out
    m = summary[0]
    assert m.runs == 4
    assert m.mean_improvement == pytest.approx((0.5 + 1.0 + 0.2 + 1.0) / 4)
    assert m.mean_best_of_k_improvement == pytest.approx((1.0 + 1.0) / 2)
    assert m.fraction_within_tolerance == pytest.approx(0.5)
    assert m.mean_delta_loglik == pytest.approx((5 + 20 + 2 + 0.45) / 4)
    assert m.mean_seconds == pytest.approx(2.0)
    assert m.seconds_ratio_to_iqtree == pytest.approx(2.0 / 2.0)
    assert m.mean_evaluations == 10
    assert m.mean_rf_normalised is None  # the rows here have no RF distance
    other = summary[1]
    assert other.mean_improvement == 0.0 and other.fraction_within_tolerance == 0.0
    assert other.mean_evaluations is None

    table = by_taxon_count(rows, ["m", "other"])
    assert list(table) == [7, 9]
    assert table[7]["m"] == pytest.approx(0.75) and table[9]["m"] == pytest.approx(0.6)
    assert table[7]["other"] == 0.0 and "other" not in table[9]


def test_summary_without_reference_reports_deltas_only():
    rows = [row("a", 7, k, "m", -110.0, -110.0 + k, None) for k in range(3)]
    (m,) = summarise(rows, ["m"])
    assert m.mean_improvement is None and m.mean_best_of_k_improvement is None
    assert m.fraction_within_tolerance is None and m.seconds_ratio_to_iqtree is None
    assert m.mean_delta_loglik == pytest.approx(1.0)
    assert by_taxon_count(rows, ["m"]) == {7: {"m": pytest.approx(1.0)}}


def test_trajectories_are_normalised_and_padded():
    r = row("a", 7, 0, "m", -110.0, -100.0, -100.0, trajectory=[-105.0, -100.0])
    assert normalised_trajectory(r) == pytest.approx([0.0, 0.5, 1.0])
    r.iqtree_loglik = None
    assert normalised_trajectory(r) == pytest.approx([0.0, 5.0, 10.0])
    assert mean_curve([[0.0, 1.0], [0.0, 0.5, 0.75, 1.0], []]) == pytest.approx([0.0, 0.75, 0.875, 1.0])
    assert mean_curve([]) == []
