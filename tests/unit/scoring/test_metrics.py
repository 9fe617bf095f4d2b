"""Cosine and correlations against scipy, computed independently (scipy is imported here only)."""

import numpy as np
from scipy import stats
from scipy.spatial.distance import cosine

from benchharness.scoring.metrics import correlations, paired_cosine


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


def _random_pairs():
    """Pairs of the shapes STS scoring meets: distinct cosines, rounded (tied) values, integer
    gold, near-constant values, float32, n from 2 up."""
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(2, 300))
        x = rng.normal(size=n)
        if trial % 5 == 1:
            x = np.round(x, 1)
        elif trial % 5 == 2:
            x = rng.integers(0, 5, n).astype(float)
        elif trial % 5 == 3:
            x = 1.0 + 1e-8 * x
        elif trial % 5 == 4:
            x = x.astype(np.float32)
        yield x, np.round(rng.uniform(0, 5, n), int(rng.integers(0, 3)))


def test_correlations_equal_scipy_bit_for_bit():
    """The NumPy Pearson and Spearman take scipy's steps, so every float is scipy's (the stored
    scores were computed with scipy; a last-bit difference would move them)."""
    for x, y in _random_pairs():
        ours = correlations(x, y)
        assert ours["pearson"] == float(stats.pearsonr(x, y)[0]) * 100.0
        assert ours["spearman"] == float(stats.spearmanr(x, y)[0]) * 100.0


def test_constant_or_nan_input_gives_nan_as_in_scipy():
    """pearson and spearman give scipy's NaN (``correlations``, the stored scores, refuses instead)."""
    import warnings

    from benchharness.scoring.metrics import pearson, spearman

    gold = np.array([1.0, 2.0, 3.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pred in (np.full(4, 0.5), np.array([0.1, np.nan, 0.3, 0.2])):
            assert np.isnan(pearson(pred, gold)) == np.isnan(stats.pearsonr(pred, gold)[0])
            assert np.isnan(spearman(pred, gold)) and np.isnan(stats.spearmanr(pred, gold)[0])


def test_rank_average_is_rankdata():
    from benchharness.scoring.metrics import rank_average

    for x, y in _random_pairs():
        for v in (x, y):
            ranks = rank_average(v)
            assert ranks.dtype == np.float64 and ranks.tobytes() == stats.rankdata(v).tobytes()
