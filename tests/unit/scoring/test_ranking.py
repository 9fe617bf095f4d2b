"""Ranking metrics on cases computed by hand (fractions written out), ties, no / all positives."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.scoring.ranking import (
    average_precision,
    means,
    per_query_metrics,
    precision_at,
    rank,
    ranked_relevance,
    reciprocal_rank,
)


def test_hand_computed_list():
    rel = [0, 1, 0, 1, 1]
    assert average_precision(rel) == pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 3)
    assert reciprocal_rank(rel) == 0.5
    assert reciprocal_rank(rel, k=1) == 0.0
    assert precision_at(rel, 1) == 0.0
    assert precision_at(rel, 5) == pytest.approx(3 / 5)


def test_ties_keep_input_order():
    scores = np.array([0.5, 0.9, 0.5, 0.9])
    assert rank(scores).tolist() == [1, 3, 0, 2]
    rel = ranked_relevance(scores, np.array([1, 0, 0, 1]))
    assert rel.tolist() == [False, True, True, False]
    assert average_precision(rel) == pytest.approx((1 / 2 + 2 / 3) / 2)
    # all-equal scores: the input (BM25) order is the ranking
    assert ranked_relevance(np.zeros(4), np.array([0, 0, 1, 0])).tolist() == [False, False, True, False]


def test_query_without_positives_scores_zero():
    rel = [0, 0, 0]
    assert average_precision(rel) == 0.0
    assert average_precision(rel, k=2, n_relevant=4) == 0.0
    assert reciprocal_rank(rel) == 0.0
    assert precision_at(rel, 1) == 0.0


def test_all_positive_list():
    rel = [1, 1, 1]
    assert average_precision(rel) == 1.0
    assert reciprocal_rank(rel) == 1.0
    assert precision_at(rel, 1) == 1.0
    assert precision_at(rel, 5) == pytest.approx(3 / 5)  # divided by k even when the list is shorter


def test_map_at_k_divides_by_min_k_and_relevant():
    rel = [0, 1, 0, 0, 1]
    assert average_precision(rel, k=3, n_relevant=3) == pytest.approx((1 / 2) / 3)
    assert average_precision(rel, k=10, n_relevant=2) == pytest.approx((1 / 2 + 2 / 5) / 2)
    assert average_precision(rel, k=10, n_relevant=5) == pytest.approx((1 / 2 + 2 / 5) / 5)


def test_mean_metrics_over_queries_x100():
    out = means(per_query_metrics([np.array([0, 1, 0, 1, 1]), np.array([1, 0, 0, 0, 0])], ks_mrr=(1, 10), ks_p=(1, 5)))
    assert out["map"] == pytest.approx(100 * ((1 / 2 + 2 / 4 + 3 / 5) / 3 + 1) / 2)
    assert out["mrr"] == pytest.approx(100 * (1 / 2 + 1) / 2)
    assert out["mrr@1"] == pytest.approx(50.0)
    assert out["p@1"] == pytest.approx(50.0)
    assert out["p@5"] == pytest.approx(100 * (3 / 5 + 1 / 5) / 2)
    with pytest.raises(ValueError):
        means(per_query_metrics([]))
