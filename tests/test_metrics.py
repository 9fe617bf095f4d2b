"""Cosine and correlations against scipy, computed independently."""

import numpy as np
from scipy import stats
from scipy.spatial.distance import cosine

from benchharness.metrics import correlations, paired_cosine


def test_paired_cosine_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(20, 7)), rng.normal(size=(20, 7))
    expected = [1.0 - cosine(x, y) for x, y in zip(a, b)]
    np.testing.assert_allclose(paired_cosine(a, b), expected, rtol=1e-12)


def test_zero_vector_scores_zero():
    a = np.array([[0.0, 0.0], [1.0, 0.0]])
    b = np.array([[1.0, 2.0], [0.0, 0.0]])
    assert paired_cosine(a, b).tolist() == [0.0, 0.0]


def test_correlations_are_scipy_times_100():
    pred = np.array([0.1, 0.4, 0.35, 0.8, 0.2])
    gold = np.array([1.0, 3.0, 2.5, 4.5, 0.5])
    out = correlations(pred, gold)
    assert out["pearson"] == 100 * stats.pearsonr(pred, gold)[0]
    assert out["spearman"] == 100 * stats.spearmanr(pred, gold)[0]
    # by hand: ranks of pred 1,4,3,5,2 and of gold 2,4,3,5,1 -> d^2 = 1+0+0+0+1 = 2
    assert abs(out["spearman"] - 100 * (1 - 6 * 2 / (5 * 24))) < 1e-9
