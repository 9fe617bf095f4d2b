"""Intervals and tests of ``benchharness.scoring.stats`` against scipy, published examples and hand work.

Monte-Carlo tolerances: a percentile-bootstrap endpoint at the 2.5% / 97.5% quantile estimated
from B resamples has a standard error of about sqrt(0.025 * 0.975 / B) / phi(1.96) = 0.0267 sigma
at B = 10,000 (sigma: the standard deviation of the bootstrap distribution, near-normal here).
Two independent estimates (ours and scipy's) differ by about 0.038 sigma (one s.e.); the tests
allow 0.15 sigma (4 s.e.). A permutation p-value from B permutations has s.e.
sqrt(p (1 - p) / B); two independent ones are allowed 4 * sqrt(2 p (1 - p) / B).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from benchharness.scoring import stats
from benchharness.scoring.stats import bootstrap as bootstrap_module
from benchharness.scoring.stats.vectorised import f1_rows, pearson_rows, row_blocks, spearman_rows

B_REF = 10_000
ENDPOINT_TOL_SIGMAS = 0.15


def sts_like(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gold on STS's 0-5 grid in steps of 0.2 (many ties) and a noisy 'cosine'."""
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 5, n) * 5) / 5
    return gold / 5 + rng.normal(0, noise, n), gold


def spearman_ref(x: np.ndarray, g: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman x100 by its definition, Pearson's r of average ranks, from scipy's ``rankdata`` and
    ``pearsonr`` along the last axis (``spearmanr`` itself ranks row by row and is too slow to
    serve as a reference for 10,000 resamples; the per-row agreement is tested above)."""
    x, g = np.broadcast_arrays(x, g)
    return 100 * sps.pearsonr(sps.rankdata(x, axis=-1), sps.rankdata(g, axis=-1), axis=-1).statistic


def assert_endpoints_close(ours: stats.Interval, low: float, high: float, sigma: float) -> None:
    tol = ENDPOINT_TOL_SIGMAS * sigma
    assert abs(ours.low - low) < tol, (ours.low, low, tol)
    assert abs(ours.high - high) < tol, (ours.high, high, tol)


# --- row-wise statistics -------------------------------------------------------------------------


def test_spearman_rows_matches_scipy_per_row_with_ties():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, size=(7, 40)).astype(float)  # heavy ties, as resampled pairs have
    y = rng.integers(0, 4, size=(7, 40)).astype(float)
    expected = [100 * sps.spearmanr(a, b)[0] for a, b in zip(x, y)]
    np.testing.assert_allclose(spearman_rows(x, y), expected, rtol=0, atol=1e-10)
    shared = [100 * sps.spearmanr(a, y[0])[0] for a in x]
    np.testing.assert_allclose(spearman_rows(x, y[0]), shared, rtol=0, atol=1e-10)


def test_pearson_rows_is_nan_for_a_constant_row_like_scipy():
    out = pearson_rows(np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]]), np.array([1.0, 2.0, 3.0]))
    assert math.isnan(out[0])
    assert out[1] == pytest.approx(sps.pearsonr([1, 2, 4], [1, 2, 3])[0], abs=1e-12)


def test_f1_rows_matches_sklearn():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(4)
    pred, labels = rng.integers(0, 2, size=(5, 30)), rng.integers(0, 2, size=(5, 30))
    expected = [100 * f1_score(t, p) for p, t in zip(pred, labels)]
    np.testing.assert_allclose(f1_rows(pred, labels), expected, atol=1e-12)
    assert f1_rows(np.zeros(4, int), np.zeros(4, int)) == 0.0  # no positive anywhere: sklearn's 0


def test_row_blocks_cover_every_row_once_within_budget():
    blocks = list(row_blocks(10, 7, budget=20))  # 2 rows of 7 cells fit in 20
    assert [(b.start, b.stop) for b in blocks] == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert [(b.start, b.stop) for b in row_blocks(3, 100, budget=10)] == [(0, 1), (1, 2), (2, 3)]


# --- single-system intervals ---------------------------------------------------------------------


def test_spearman_interval_matches_scipy_bootstrap_percentile():
    pred, gold = sts_like(150, 0.25, seed=1)
    ours = stats.bootstrap_spearman(pred, gold, n_resamples=B_REF, seed=11)
    ref = sps.bootstrap(
        (pred, gold),
        spearman_ref,
        paired=True,
        n_resamples=B_REF,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(12),
    )
    assert ours.estimate == pytest.approx(100 * sps.spearmanr(pred, gold)[0], abs=1e-12)
    iv = ours.interval()
    assert (iv.unit, iv.resamples, iv.n, iv.method) == ("pairs", B_REF, 150, "percentile bootstrap")
    assert_endpoints_close(iv, ref.confidence_interval.low, ref.confidence_interval.high, ours.values.std())


def test_resampling_keeps_pairs_together():
    # pred == gold: every resample pairs each value with itself, so every resample scores 100
    gold = np.arange(40, dtype=float)
    iv = stats.bootstrap_spearman(gold, gold, n_resamples=500, seed=0).interval()
    assert (iv.estimate, iv.low, iv.high) == pytest.approx((100.0, 100.0, 100.0), abs=1e-9)


def test_bootstrap_is_seeded_and_independent_of_block_size(monkeypatch):
    pred, gold = sts_like(300, 0.3, seed=2)
    a = stats.bootstrap_spearman(pred, gold, n_resamples=1000, seed=5).values
    assert np.array_equal(a, stats.bootstrap_spearman(pred, gold, n_resamples=1000, seed=5).values)
    assert not np.array_equal(a, stats.bootstrap_spearman(pred, gold, n_resamples=1000, seed=6).values)
    monkeypatch.setattr(bootstrap_module, "row_blocks", lambda rows, length: row_blocks(rows, length, budget=1000))
    assert np.array_equal(a, stats.bootstrap_spearman(pred, gold, n_resamples=1000, seed=5).values)


def test_percentile_endpoints_by_hand():
    # 101 values 0..100: the 2.5% and 97.5% quantiles with linear interpolation are 2.5 and 97.5
    reps = stats.Replicates(estimate=50.0, values=np.arange(101, dtype=float), unit="items", n=101, seed=0)
    iv = reps.interval(0.95)
    assert (iv.low, iv.high) == pytest.approx((2.5, 97.5), abs=1e-12)
    assert reps.interval(0.5).low == pytest.approx(25.0, abs=1e-12)


def test_accuracy_interval_matches_scipy_bootstrap():
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 3, 500)
    pred = np.where(rng.random(500) < 0.8, labels, (labels + 1) % 3)
    ours = stats.bootstrap_accuracy(pred, labels, n_resamples=B_REF, seed=1)
    correct = (pred == labels).astype(float)
    ref = sps.bootstrap(
        (correct,),
        lambda c, axis: 100 * c.mean(axis=axis),
        n_resamples=B_REF,
        method="percentile",
        rng=np.random.default_rng(2),
    )
    assert ours.estimate == pytest.approx(100 * correct.mean())
    assert ours.interval().unit == "test items"
    assert_endpoints_close(
        ours.interval(), ref.confidence_interval.low, ref.confidence_interval.high, ours.values.std()
    )


def test_f1_interval_matches_scipy_bootstrap():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(8)
    labels = rng.integers(0, 2, 400)
    pred = np.where(rng.random(400) < 0.75, labels, 1 - labels)

    def f1_by_counts(p, t, axis):  # written out here, independent of the library's f1_rows
        tp = ((p == 1) & (t == 1)).sum(axis=axis)
        fp = ((p == 1) & (t == 0)).sum(axis=axis)
        fn = ((p == 0) & (t == 1)).sum(axis=axis)
        return 100 * 2 * tp / (2 * tp + fp + fn)

    ours = stats.bootstrap_f1(pred, labels, n_resamples=B_REF, seed=3)
    ref = sps.bootstrap(
        (pred, labels), f1_by_counts, paired=True, n_resamples=B_REF, method="percentile", rng=np.random.default_rng(4)
    )
    assert ours.estimate == pytest.approx(100 * f1_score(labels, pred), abs=1e-12)
    assert_endpoints_close(
        ours.interval(), ref.confidence_interval.low, ref.confidence_interval.high, ours.values.std()
    )


def test_fold_mean_resamples_folds_not_items():
    folds = np.array([80.1, 81.5, 79.9, 82.3, 80.7, 81.0, 80.2, 79.5, 81.8, 80.6])
    ours = stats.bootstrap_fold_mean(folds, n_resamples=B_REF, seed=9)
    ref = sps.bootstrap((folds,), np.mean, n_resamples=B_REF, method="percentile", rng=np.random.default_rng(10))
    iv = ours.interval()
    assert (iv.estimate, iv.unit, iv.n) == (pytest.approx(folds.mean()), "outer folds", 10)
    assert_endpoints_close(iv, ref.confidence_interval.low, ref.confidence_interval.high, ours.values.std())
    flat = stats.bootstrap_fold_mean(np.full(10, 85.0), n_resamples=200).interval()
    assert (flat.low, flat.high) == (85.0, 85.0)


def test_per_query_mean_by_hand():
    # RR per query in {0, 1}, n = 2: a resample mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4,
    # so the central 95% interval of 4,000 resamples spans both extremes and the mean is near 50
    reps = stats.bootstrap_mean(np.array([0.0, 1.0]), unit="queries", n_resamples=4000, seed=0)
    assert reps.estimate == 50.0
    assert set(np.unique(reps.values)) == {0.0, 50.0, 100.0}
    assert (reps.interval().low, reps.interval().high) == (0.0, 100.0)
    assert abs((reps.values == 50.0).mean() - 0.5) < 4 * math.sqrt(0.25 / 4000)


def test_sts_all_resamples_the_concatenation_and_mean_is_stratified():
    # Within each subset the prediction orders pairs perfectly, but subset B's cosines are shifted
    # down: pooled ('all') Spearman is below 100, every per-subset resample is exactly 100.
    rng = np.random.default_rng(0)
    gold_a, gold_b = rng.permutation(40) / 8.0, rng.permutation(25) / 5.0
    subsets = {"A": (gold_a / 5 + 0.5, gold_a), "B": (gold_b / 5 - 0.5, gold_b)}
    pooled = stats.bootstrap_sts(subsets, "all", n_resamples=500, seed=1)
    direct = stats.bootstrap_spearman(
        np.concatenate([gold_a / 5 + 0.5, gold_b / 5 - 0.5]), np.concatenate([gold_a, gold_b]), n_resamples=500, seed=1
    )
    assert np.array_equal(pooled.values, direct.values)
    assert pooled.interval().high < 100
    for agg in ("mean", "wmean"):
        iv = stats.bootstrap_sts(subsets, agg, n_resamples=500, seed=1).interval()
        assert (iv.estimate, iv.low, iv.high) == pytest.approx((100, 100, 100), abs=1e-9)
        assert iv.unit == "pairs, resampled within each subset"


def test_sts_mean_and_wmean_estimates_follow_senteval():
    parts = {
        name: sts_like(n, noise, seed)
        for name, n, noise, seed in (("x", 60, 0.1, 1), ("y", 30, 0.6, 2), ("z", 90, 0.3, 3))
    }
    rhos = {k: 100 * sps.spearmanr(p, g)[0] for k, (p, g) in parts.items()}
    mean = stats.bootstrap_sts(parts, "mean", n_resamples=200)
    wmean = stats.bootstrap_sts(parts, "wmean", n_resamples=200)
    assert mean.estimate == pytest.approx(np.mean(list(rhos.values())))
    assert wmean.estimate == pytest.approx((60 * rhos["x"] + 30 * rhos["y"] + 90 * rhos["z"]) / 180)
    assert not np.array_equal(mean.values, wmean.values)
    with pytest.raises(ValueError, match="unknown STS aggregation 'median'"):
        stats.bootstrap_sts(parts, "median")


def test_average_over_tasks_by_hand():
    t1 = stats.Replicates(estimate=80.0, values=np.array([78.0, 80.0, 82.0, 84.0]), unit="pairs", n=100, seed=1)
    t2 = stats.Replicates(estimate=60.0, values=np.array([62.0, 58.0, 60.0, 56.0]), unit="pairs", n=50, seed=2)
    avg = stats.average([t1, t2])
    assert avg.estimate == 70.0
    np.testing.assert_array_equal(avg.values, [70.0, 69.0, 71.0, 70.0])
    short = stats.Replicates(estimate=1.0, values=np.zeros(3), unit="pairs", n=3, seed=0)
    with pytest.raises(ValueError, match="different numbers of resamples"):
        stats.average([t1, short])


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"differ in length: \{'pred': 3, 'gold': 4\}"):
        stats.bootstrap_spearman(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="confidence level"):
        stats.bootstrap_mean(np.ones(5), unit="queries", n_resamples=10).interval(95)
    with pytest.raises(ValueError, match="undefined statistic"):
        stats.bootstrap_spearman(np.arange(5.0), np.ones(5), n_resamples=10).interval()
    with pytest.raises(ValueError, match="positive number of resamples"):
        stats.bootstrap_mean(np.ones(5), unit="queries", n_resamples=0)


def test_derived_seeds_are_stable_and_distinct():
    assert stats.derive_seed(0, "STS12") == stats.derive_seed(0, "STS12")
    assert len({stats.derive_seed(0, "STS12"), stats.derive_seed(0, "STS13"), stats.derive_seed(1, "STS12")}) == 3


# --- paired comparisons --------------------------------------------------------------------------


def test_paired_spearman_p_value_matches_scipy_permutation_test():
    gold = np.round(np.random.default_rng(5).uniform(0, 5, 120) * 5) / 5
    rng = np.random.default_rng(6)
    a = gold + rng.normal(0, 1.2, 120)
    b = 0.2 * gold + rng.normal(0, 0.3, 120) + 3  # another scale and offset than A
    ours = stats.paired_spearman(a, b, gold, n_resamples=B_REF, seed=2).comparison()
    ra, rb = sps.rankdata(a), sps.rankdata(b)  # the library swaps ranks; so does the reference
    ref = sps.permutation_test(
        (ra, rb),
        lambda x, y, axis: spearman_ref(x, gold) - spearman_ref(y, gold),
        permutation_type="samples",
        n_resamples=B_REF,
        rng=np.random.default_rng(3),
    )
    assert ours.difference == pytest.approx(ref.statistic, abs=1e-9)
    assert 0.01 < ref.pvalue < 0.5  # the comparison is informative only for a middling p
    assert abs(ours.p_value - ref.pvalue) < 4 * math.sqrt(2 * ref.pvalue * (1 - ref.pvalue) / B_REF)


def test_paired_spearman_interval_matches_scipy_paired_bootstrap():
    pred_a, gold = sts_like(150, 0.2, seed=7)
    pred_b = gold / 5 + np.random.default_rng(8).normal(0, 0.35, 150)
    ours = stats.paired_spearman(pred_a, pred_b, gold, n_resamples=B_REF, seed=4)
    ref = sps.bootstrap(
        (pred_a, pred_b, gold),
        lambda x, y, g, axis: spearman_ref(x, g) - spearman_ref(y, g),
        paired=True,
        n_resamples=B_REF,
        method="percentile",
        rng=np.random.default_rng(5),
    )
    assert_endpoints_close(
        ours.comparison(), ref.confidence_interval.low, ref.confidence_interval.high, ours.bootstrap.std()
    )


def test_paired_mean_matches_scipy_for_per_query_values():
    rng = np.random.default_rng(9)
    ap_a = rng.beta(2, 2, 186)
    ap_b = np.clip(ap_a - 0.015 + rng.normal(0, 0.15, 186), 0, 1)
    ours = stats.paired_mean(ap_a, ap_b, unit="queries", n_resamples=B_REF, seed=6)
    cmp = ours.comparison()
    ref_p = sps.permutation_test(
        (ap_a, ap_b),
        lambda x, y, axis: 100 * (x - y).mean(axis=axis),
        permutation_type="samples",
        n_resamples=B_REF,
        rng=np.random.default_rng(7),
    )
    ref_ci = sps.bootstrap(
        (ap_a - ap_b,),
        lambda d, axis: 100 * d.mean(axis=axis),
        n_resamples=B_REF,
        method="percentile",
        rng=np.random.default_rng(8),
    )
    assert cmp.difference == pytest.approx(100 * (ap_a - ap_b).mean())
    assert 0.01 < ref_p.pvalue < 0.5
    assert abs(cmp.p_value - ref_p.pvalue) < 4 * math.sqrt(2 * ref_p.pvalue * (1 - ref_p.pvalue) / B_REF)
    assert_endpoints_close(cmp, ref_ci.confidence_interval.low, ref_ci.confidence_interval.high, ours.bootstrap.std())


def test_permutation_p_value_by_hand():
    # Three items, A beats B by 1 on each: a random swap pattern flips each sign, so the permuted
    # mean difference is +-1 (all signs equal: 2 of 8 patterns) or +-1/3. Exact p = 2/8 = 0.25.
    res = stats.paired_mean(np.ones(3), np.zeros(3), unit="items", scale=1.0, n_resamples=B_REF, seed=0)
    assert res.difference == 1.0
    assert abs(res.p_value() - 0.25) < 4 * math.sqrt(0.25 * 0.75 / B_REF)
    # identical systems: difference 0, every permutation as extreme, p = 1, CI [0, 0]
    same = stats.paired_accuracy(
        np.array([1, 0, 1, 1]), np.array([1, 0, 1, 1]), np.array([1, 1, 0, 1]), n_resamples=300
    ).comparison()
    assert (same.difference, same.p_value, same.low, same.high) == (0.0, 1.0, 0.0, 0.0)
    # A right on all 40 items, B on none: only the two all-equal-sign patterns (2 / 2^40) reach 100
    far = stats.paired_accuracy(np.ones(40), np.zeros(40), np.ones(40), n_resamples=999).comparison()
    assert (far.difference, far.p_value) == (100.0, 1 / 1000)


def test_paired_sts_stratified_difference_follows_senteval_mean():
    parts = {name: sts_like(n, 0.2, seed) for name, n, seed in (("p", 50, 1), ("q", 70, 2))}
    other = {k: g / 5 + np.random.default_rng(len(k)).normal(0, 0.4, len(g)) for k, (_, g) in parts.items()}
    a = {k: p for k, (p, _) in parts.items()}
    golds = {k: g for k, (_, g) in parts.items()}
    rho = lambda x, g: 100 * sps.spearmanr(x, g)[0]
    diffs = {k: rho(a[k], golds[k]) - rho(other[k], golds[k]) for k in golds}
    mean = stats.paired_sts(a, other, golds, "mean", n_resamples=200)
    wmean = stats.paired_sts(a, other, golds, "wmean", n_resamples=200)
    assert mean.difference == pytest.approx((diffs["p"] + diffs["q"]) / 2)
    assert wmean.difference == pytest.approx((50 * diffs["p"] + 70 * diffs["q"]) / 120)
    cat = lambda d: np.concatenate([d["p"], d["q"]])
    assert stats.paired_sts(a, other, golds, "all", n_resamples=200).difference == pytest.approx(
        rho(cat(a), cat(golds)) - rho(cat(other), cat(golds))
    )
    with pytest.raises(ValueError, match="subset names differ"):
        stats.paired_sts({"p": a["p"]}, other, golds, "mean")


def test_average_paired_by_hand():
    t1 = stats.PairedReplicates(
        difference=2.0, bootstrap=np.array([1.0, 3.0]), null=np.array([0.5, -0.5]), unit="pairs", n=10, seed=0
    )
    t2 = stats.PairedReplicates(
        difference=-1.0, bootstrap=np.array([-2.0, 0.0]), null=np.array([-4.5, 0.5]), unit="queries", n=20, seed=1
    )
    avg = stats.average_paired([t1, t2])
    assert avg.difference == 0.5
    np.testing.assert_array_equal(avg.bootstrap, [-0.5, 1.5])
    np.testing.assert_array_equal(avg.null, [-2.0, 0.0])
    assert avg.p_value() == 2 / 3  # |-2.0| >= 0.5, |0.0| < 0.5: (1 + 1) / (1 + 2)


# --- closed-form tests ---------------------------------------------------------------------------


def test_steiger_against_published_examples():
    # Steiger (1980), Psychological Bulletin 87, 245-251, Case A (p. 249): r12 = .4, r13 = .5,
    # r23 = .1, N = 103. The paper prints Z = -.8913, computed with the covariance rounded to .0042;
    # the unrounded formula gives -0.8887 (noted in the tests of the R package cocor).
    case_a = stats.steiger_z(0.4, 0.5, 0.1, 103)
    assert case_a.z == pytest.approx(-0.8913, abs=0.003)
    assert case_a.z == pytest.approx(-0.8887, abs=5e-5)
    # Silver, Hittner & May (2006), DEPCOR (Applied Psychological Measurement 30, 152-153): r12 = .3,
    # r13 = .4, r23 = .5, n = 100 -> Z = -1.0718, two-sided p = .2838.
    depcor = stats.steiger_z(0.3, 0.4, 0.5, 100)
    assert round(depcor.z, 4) == -1.0718
    assert round(depcor.p_value, 4) == 0.2838


def test_steiger_spearman_uses_spearman_correlations_and_checks_input():
    pred_a, gold = sts_like(200, 0.2, seed=1)
    pred_b = gold / 5 + np.random.default_rng(2).normal(0, 0.4, 200)
    res = stats.steiger_spearman(pred_a, pred_b, gold)
    assert res.r_gold_a == pytest.approx(sps.spearmanr(gold, pred_a)[0])
    assert res.r_a_b == pytest.approx(sps.spearmanr(pred_a, pred_b)[0])
    assert res.z > 0 and res.n == 200
    with pytest.raises(ValueError, match="r_a_b must be a correlation strictly between -1 and 1"):
        stats.steiger_z(0.5, 0.4, 1.0, 50)
    with pytest.raises(ValueError, match="n > 3"):
        stats.steiger_z(0.5, 0.4, 0.2, 3)


def _mcnemar_case(a_only: int, b_only: int, both: int, neither: int):
    labels = np.ones(a_only + b_only + both + neither, dtype=int)
    pred_a = np.concatenate([np.ones(a_only), np.zeros(b_only), np.ones(both), np.zeros(neither)]).astype(int)
    pred_b = np.concatenate([np.zeros(a_only), np.ones(b_only), np.ones(both), np.zeros(neither)]).astype(int)
    return pred_a, pred_b, labels


def test_mcnemar_by_hand():
    pred_a, pred_b, labels = _mcnemar_case(a_only=10, b_only=3, both=50, neither=7)
    exact = stats.mcnemar(pred_a, pred_b, labels)
    # two-sided binomial: 2 * P(X <= 3), X ~ Bin(13, 1/2) = 2 * (1 + 13 + 78 + 286) / 2^13
    assert (exact.a_only, exact.b_only) == (10, 3)
    assert exact.p_value == pytest.approx(2 * 378 / 8192, abs=1e-12)
    assert exact.p_value == pytest.approx(sps.binomtest(3, 13, 0.5).pvalue, abs=1e-12)
    corrected = stats.mcnemar(pred_a, pred_b, labels, exact=False)
    assert corrected.statistic == pytest.approx(36 / 13)  # (|10 - 3| - 1)^2 / 13
    assert corrected.p_value == pytest.approx(math.erfc(math.sqrt(36 / 13 / 2)), abs=1e-12)  # chi2(1) tail
    plain = stats.mcnemar(pred_a, pred_b, labels, exact=False, correction=False)
    assert plain.statistic == pytest.approx(49 / 13)
    none = stats.mcnemar(*_mcnemar_case(0, 0, 5, 5))
    assert (none.p_value, none.statistic) == (1.0, 0.0)


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max -> 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == [1.0, 1.0]  # 0.5 * 2 = 1.0 caps, and 0.6 keeps the running max
    assert stats.holm([]) == []
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        stats.holm([0.2, 1.5])


def test_counting_ranks_of_resamples_equal_scipy_rankdata():
    """The bootstrap ranks resamples by counting tie groups; scipy ranks each row by sorting."""
    from scipy.stats import rankdata

    from benchharness.scoring.stats.vectorised import resampled_ranks, tie_groups

    rng = np.random.default_rng(7)
    values = np.round(rng.normal(size=500), 1)  # many ties
    idx = rng.integers(0, 500, size=(40, 500))
    groups, n_groups = tie_groups(values)
    assert np.array_equal(resampled_ranks(groups, n_groups, idx), rankdata(values[idx], axis=-1))


@pytest.mark.parametrize("n", [2, 3, 50, 1379])
def test_bootstrap_spearman_from_integer_sums_equals_float_ranks_bit_for_bit(n, monkeypatch):
    """``spearman_resamples`` sums twice-centred ranks in int64; those sums are exact in float64 as
    well, so the values are those of ``pearson_rows`` on the float ranks (scipy's rankdata), bit for
    bit, with or without ties, in any grouping of rows (and through the float fallback)."""
    from scipy.stats import rankdata

    from benchharness.scoring.stats import vectorised
    from benchharness.scoring.stats.vectorised import pearson_rows, spearman_resamples, tie_groups

    rng = np.random.default_rng(n)
    idx = rng.integers(0, n, size=(70, n))
    for x in (rng.normal(size=n), np.round(rng.normal(size=n), 1), np.ones(n)):
        gold = np.round(rng.uniform(0, 5, n), 1)
        expected = 100.0 * pearson_rows(rankdata(x[idx], axis=-1), rankdata(gold[idx], axis=-1))
        got = spearman_resamples(tie_groups(x), tie_groups(gold), idx)
        assert got.tobytes() == expected.tobytes()
        monkeypatch.setattr(vectorised, "RANK_ROWS", 7)
        assert spearman_resamples(tie_groups(x), tie_groups(gold), idx).tobytes() == expected.tobytes()
        monkeypatch.setattr(vectorised, "EXACT_ITEMS", 1)  # the float path
        assert spearman_resamples(tie_groups(x), tie_groups(gold), idx).tobytes() == expected.tobytes()
        monkeypatch.undo()
