"""Paired comparison of two systems scored on the same items: is A's score different from B's?

For every comparison two resampling procedures run on the same items:

- a paired bootstrap of the difference A - B (one set of resampled indices for both systems), whose
  percentile interval is the CI of the difference;
- a paired permutation test: under the null hypothesis that the two systems are exchangeable, each
  item's two outputs may be swapped; ``n_resamples`` random swap patterns (each item swapped with
  probability 1/2) give the null distribution of the difference. The two-sided p-value is
  ``(1 + #{|null| >= |observed|}) / (1 + n_resamples)``: the observed statistic counts as one of
  the permutations, so p is never 0 (Phipson & Smyth, 2010).

For Spearman on a shared gold, each system's similarities are replaced by their ranks before
swapping: Spearman depends on the ranks only, and swapping raw cosines between encoders whose
cosines live on different ranges (0.6-1.0 for one, 0-1 for another) would test the ranges, not the
agreement with the gold. For means of per-item values (accuracy, AP, RR) swapping the two values
flips the sign of the item's difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.scoring.metrics import spearman
from benchharness.scoring.stats.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    STS_AGGREGATIONS,
    as_columns,
    check_resamples,
    derive_seed,
    mean_of_parts,
    percentile_interval,
    resample_statistic,
)
from benchharness.scoring.stats.vectorised import row_blocks, spearman_rows

# Differences are x100 scores: a permuted difference within this of the observed one counts as
# "as extreme" (floating-point sums over reordered items differ in the last bits).
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Comparison:
    """A - B with its paired-bootstrap CI and the paired-permutation p-value (two-sided)."""

    difference: float
    low: float
    high: float
    level: float
    p_value: float
    resamples: int
    unit: str
    n: int
    seed: int | None
    interval_method: str = "paired percentile bootstrap"
    test: str = "paired permutation (per-item swap), two-sided"


@dataclass(frozen=True, eq=False)
class PairedReplicates:
    """Observed difference A - B, its paired-bootstrap resamples and its permutation null."""

    difference: float
    bootstrap: np.ndarray
    null: np.ndarray
    unit: str
    n: int
    seed: int | None

    def p_value(self) -> float:
        extreme = np.abs(self.null) >= abs(self.difference) - TIE_TOLERANCE
        return float((1 + extreme.sum()) / (1 + len(self.null)))

    def comparison(self, level: float = DEFAULT_LEVEL) -> Comparison:
        low, high = percentile_interval(self.bootstrap, level)
        return Comparison(
            difference=self.difference,
            low=low,
            high=high,
            level=level,
            p_value=self.p_value(),
            resamples=len(self.bootstrap),
            unit=self.unit,
            n=self.n,
            seed=self.seed,
        )


def _swap_null(
    statistic_pair: Callable[[np.ndarray, np.ndarray], np.ndarray],
    a: np.ndarray,
    b: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Permutation null of ``stat(a') - stat(b')`` where each item's (a, b) is swapped at random."""
    check_resamples(n_resamples)
    n = len(a)
    out = np.empty(n_resamples, dtype=np.float64)
    for rows in row_blocks(n_resamples, 3 * n):
        swap = rng.random((rows.stop - rows.start, n)) < 0.5
        out[rows] = statistic_pair(np.where(swap, b, a), np.where(swap, a, b))
    return out


def paired_spearman(
    pred_a: np.ndarray, pred_b: np.ndarray, gold: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> PairedReplicates:
    """Spearman(A, gold) - Spearman(B, gold), x100, over the same pairs."""
    pred_a, pred_b, gold = (
        x.astype(np.float64) for x in as_columns(pred_a, pred_b, gold, names=("pred_a", "pred_b", "gold"))
    )
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    boot = resample_statistic(
        lambda a, b, g: spearman_rows(a, g) - spearman_rows(b, g), (pred_a, pred_b, gold), n_resamples, rng
    )
    null = _swap_null(
        lambda a, b: spearman_rows(a, gold) - spearman_rows(b, gold),
        rankdata(pred_a),
        rankdata(pred_b),
        n_resamples,
        rng,
    )
    observed = 100.0 * (spearman(pred_a, gold) - spearman(pred_b, gold))
    return PairedReplicates(difference=observed, bootstrap=boot, null=null, unit="pairs", n=len(gold), seed=seed)


def paired_mean(
    values_a: np.ndarray,
    values_b: np.ndarray,
    *,
    unit: str,
    scale: float = 100.0,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedReplicates:
    """mean(A) - mean(B) x ``scale`` for per-unit values on the same units: 0/1 correctness per
    test item, AP or RR per query (``unit="queries"``), accuracy per outer fold (``scale=1``)."""
    values_a, values_b = (x.astype(np.float64) for x in as_columns(values_a, values_b, names=("values_a", "values_b")))
    diff = values_a - values_b
    rng = np.random.default_rng(seed)
    boot = resample_statistic(lambda d: scale * d.mean(axis=-1), (diff,), n_resamples, rng)
    null = _swap_null(lambda a, b: scale * (a - b).mean(axis=-1), values_a, values_b, n_resamples, rng)
    return PairedReplicates(
        difference=scale * float(diff.mean()), bootstrap=boot, null=null, unit=unit, n=len(diff), seed=seed
    )


def paired_accuracy(
    pred_a: np.ndarray, pred_b: np.ndarray, labels: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> PairedReplicates:
    """Accuracy(A) - accuracy(B), x100, over the same test items."""
    pred_a, pred_b, labels = as_columns(pred_a, pred_b, labels, names=("pred_a", "pred_b", "labels"))
    return paired_mean(pred_a == labels, pred_b == labels, unit="test items", n_resamples=n_resamples, seed=seed)


def weighted_average_paired(
    parts: Sequence[PairedReplicates], weights: Sequence[float] | None = None, *, unit: str
) -> PairedReplicates:
    """Per-resample (weighted) mean of independent paired comparisons (strata, or tasks for Avg.).

    Swaps in different strata are independent, so averaging the null vectors gives the null of
    the averaged difference, and likewise for the bootstrap vectors.
    """
    if not parts:
        raise InvalidInputError("nothing to average: no paired replicates given")
    difference, (bootstrap, null) = mean_of_parts(
        [p.difference for p in parts],
        [[p.bootstrap for p in parts], [p.null for p in parts]],
        weights,
        again="compare each",
    )
    return PairedReplicates(difference, bootstrap, null, unit=unit, n=sum(p.n for p in parts), seed=None)


def average_paired(tasks: Sequence[PairedReplicates]) -> PairedReplicates:
    """Avg.(A) - Avg.(B) over tasks, from each task's paired comparison."""
    return weighted_average_paired(tasks, unit="mean over tasks, each resampled over its own items")


def paired_sts(
    subsets_a: Mapping[str, np.ndarray],
    subsets_b: Mapping[str, np.ndarray],
    golds: Mapping[str, np.ndarray],
    aggregation: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedReplicates:
    """Paired comparison of an STS12-16 score, per-subset arrays keyed by subset name.

    ``all``: one paired comparison over the concatenated pairs; ``mean``/``wmean``: stratified,
    each subset compared on its own (seeded per subset name) and the differences averaged.
    """
    if aggregation not in STS_AGGREGATIONS:
        raise InvalidInputError(f"unknown STS aggregation {aggregation!r}; expected one of {STS_AGGREGATIONS}")
    names = list(golds)
    if not names or set(subsets_a) != set(names) or set(subsets_b) != set(names):
        raise InvalidInputError(
            f"subset names differ: A {sorted(subsets_a)}, B {sorted(subsets_b)}, gold {sorted(golds)}"
        )
    if aggregation == "all":

        def cat(per_subset: Mapping[str, np.ndarray]) -> np.ndarray:
            return np.concatenate([np.asarray(per_subset[k]) for k in names])

        return paired_spearman(cat(subsets_a), cat(subsets_b), cat(golds), n_resamples=n_resamples, seed=seed)
    parts = [
        paired_spearman(subsets_a[k], subsets_b[k], golds[k], n_resamples=n_resamples, seed=derive_seed(seed, k))
        for k in names
    ]
    weights = [p.n for p in parts] if aggregation == "wmean" else None
    out = weighted_average_paired(parts, weights, unit="pairs, resampled within each subset")
    return PairedReplicates(
        difference=out.difference, bootstrap=out.bootstrap, null=out.null, unit=out.unit, n=out.n, seed=seed
    )
