"""Percentile-bootstrap confidence intervals for every score the harness reports.

What is resampled is the unit the score averages over, and every interval says which:

- STS (STS-B, SICK-R, STS12-16 ``all``): pairs, with replacement, Spearman recomputed on each
  resample (``bootstrap_spearman``). For STS12-16 ``mean``/``wmean`` the resampling is stratified:
  each subset is resampled within itself and the per-subset correlations are aggregated per
  resample exactly as the score aggregates them (``bootstrap_sts``).
- Transfer with a fixed test set (SST2, TREC, MRPC): test items (``bootstrap_accuracy``,
  ``bootstrap_f1``). Transfer with outer k-fold cross-validation (MR, CR, SUBJ, MPQA): the outer
  fold accuracies (``bootstrap_fold_mean``).
- Ranking (AskUbuntu, QQP): queries, through the per-query AP or RR (``bootstrap_mean``).

The interval reported is the percentile interval (the ``level`` central quantiles of the
resampled statistic, linear interpolation, as ``scipy.stats.bootstrap(method="percentile")``);
BCa is not offered. Resamples are kept (``Replicates.values``) so that intervals for averages
over tasks (the Avg. column) are formed from the per-task resamples rather than from the
intervals: ``average`` averages the resample vectors of independently bootstrapped tasks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.scoring.metrics import spearman
from benchharness.scoring.stats.vectorised import f1_rows, row_blocks, spearman_resamples, tie_groups

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
STS_AGGREGATIONS = ("all", "mean", "wmean")


@dataclass(frozen=True)
class Interval:
    """A score with its confidence interval, and what the interval was computed over."""

    estimate: float
    low: float
    high: float
    level: float
    method: str
    resamples: int
    unit: str
    n: int
    seed: int | None


@dataclass(frozen=True, eq=False)
class Replicates:
    """A statistic on the full sample (``estimate``) and on each of ``len(values)`` resamples."""

    estimate: float
    values: np.ndarray
    unit: str
    n: int
    seed: int | None

    def interval(self, level: float = DEFAULT_LEVEL) -> Interval:
        low, high = percentile_interval(self.values, level)
        return Interval(
            estimate=self.estimate,
            low=low,
            high=high,
            level=level,
            method="percentile bootstrap",
            resamples=len(self.values),
            unit=self.unit,
            n=self.n,
            seed=self.seed,
        )


def percentile_interval(values: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of the resampled statistic (linear interpolation)."""
    if not 0.0 < level < 1.0:
        raise InvalidInputError(f"confidence level must lie strictly between 0 and 1, got {level!r}")
    values = np.asarray(values, dtype=np.float64)
    undefined = int(np.isnan(values).sum())
    if undefined:
        raise InvalidInputError(
            f"{undefined} of {len(values)} resamples give an undefined statistic (a resample "
            "with constant values has no correlation): too few items to bootstrap"
        )
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def derive_seed(seed: int, name: str) -> int:
    """A seed for one task or subset, fixed by the run seed and its name.

    Tasks averaged into Avg. and subsets of a stratified bootstrap must be resampled independently;
    one generator per name, seeded from a hash (not Python's salted ``hash``), keeps every stream
    reproducible and independent of the order in which tasks are evaluated.
    """
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def check_resamples(n_resamples: int) -> None:
    if n_resamples < 1:
        raise InvalidInputError(f"n_resamples must be a positive number of resamples, got {n_resamples!r}")


def as_columns(*arrays: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
    """1-D arrays of one common length >= 2, or a ValueError naming the offending argument."""
    out = [np.asarray(a) for a in arrays]
    for name, a in zip(names, out):
        if a.ndim != 1:
            raise InvalidInputError(f"{name} must be a 1-D array of per-item values, got shape {a.shape}")
    lengths = {name: len(a) for name, a in zip(names, out)}
    if len(set(lengths.values())) != 1:
        raise InvalidInputError(f"per-item arrays differ in length: {lengths}")
    if out[0].shape[0] < 2:
        raise InvalidInputError(f"need at least 2 items to resample, got {lengths}")
    return out


def resample_statistic(
    statistic: Callable[..., np.ndarray], arrays: Sequence[np.ndarray], n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``statistic`` on ``n_resamples`` bootstrap resamples of the items of ``arrays``.

    The same resampled indices apply to every array (items stay paired). ``statistic`` receives
    ``(rows, n)`` matrices, one resample per row, and returns one value per row.
    """
    check_resamples(n_resamples)
    n = len(arrays[0])
    out = np.empty(n_resamples, dtype=np.float64)
    for rows in row_blocks(n_resamples, n * len(arrays)):
        idx = rng.integers(0, n, size=(rows.stop - rows.start, n))
        out[rows] = statistic(*(a[idx] for a in arrays))
    return out


def bootstrap_spearman(
    pred: np.ndarray, gold: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Replicates:
    """Spearman x100 between predicted similarities and gold scores, resampling pairs."""
    pred, gold = as_columns(pred, gold, names=("pred", "gold"))
    pred, gold = pred.astype(np.float64), gold.astype(np.float64)
    check_resamples(n_resamples)
    rng, n = np.random.default_rng(seed), len(pred)
    pred_groups, gold_groups = tie_groups(pred), tie_groups(gold)
    values = np.empty(n_resamples, dtype=np.float64)
    for rows in row_blocks(n_resamples, n * 2):  # the blocks, hence the draws, of resample_statistic
        idx = rng.integers(0, n, size=(rows.stop - rows.start, n))
        values[rows] = spearman_resamples(pred_groups, gold_groups, idx)
    return Replicates(estimate=100.0 * spearman(pred, gold), values=values, unit="pairs", n=len(pred), seed=seed)


def normalised_weights(weights: Sequence[float] | None, count: int) -> np.ndarray:
    """``count`` weights summing to one (equal ones when ``weights`` is None), refusing a wrong
    count, a negative weight or an all-zero set."""
    w = np.ones(count) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (count,) or np.any(w < 0) or w.sum() <= 0:
        raise InvalidInputError(f"weights must be {count} non-negative numbers with a positive sum, got {weights!r}")
    return w / w.sum()


def weighted_average(parts: Sequence[Replicates], weights: Sequence[float] | None = None, *, unit: str) -> Replicates:
    """The (weighted) mean of independently resampled statistics, resample by resample.

    Used for a stratified bootstrap (each stratum resampled on its own) and for Avg. over tasks;
    every part must have the same number of resamples.
    """
    if not parts:
        raise InvalidInputError("nothing to average: no replicates given")
    estimate, (values,) = mean_of_parts(
        [p.estimate for p in parts], [[p.values for p in parts]], weights, again="bootstrap each"
    )
    return Replicates(estimate=estimate, values=values, unit=unit, n=sum(p.n for p in parts), seed=None)


def mean_of_parts(
    estimates: Sequence[float], resamples: Sequence[Sequence[np.ndarray]], weights: Sequence[float] | None, again: str
) -> tuple[float, list[np.ndarray]]:
    """The (weighted) mean of independent parts' estimates and, resample by resample, of each of
    their vectors of resamples (``resamples[j]``: every part's j-th vector, such as a bootstrap's or
    a permutation null's). Resample ``i`` of the mean is the mean of the parts' resamples ``i``, so
    each vector must have as many resamples in every part (``again``: how to redo them so)."""
    for vectors in resamples:
        sizes = {len(vector) for vector in vectors}
        if len(sizes) != 1:
            raise InvalidInputError(
                f"parts have different numbers of resamples {sorted(sizes)}; {again} with the same n_resamples"
            )
    w = normalised_weights(weights, len(estimates))
    return float(np.dot(w, estimates)), [np.tensordot(w, np.stack(vectors), axes=1) for vectors in resamples]


def average(tasks: Sequence[Replicates]) -> Replicates:
    """Avg. over tasks (plain mean, as the papers' Avg. column): tasks are independent samples,
    so the Avg. resample ``i`` is the mean of every task's resample ``i``."""
    return weighted_average(tasks, unit="mean over tasks, each resampled over its own items")


def bootstrap_sts(
    subsets: Mapping[str, tuple[np.ndarray, np.ndarray]],
    aggregation: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Replicates:
    """Interval for an STS12-16 score from its subsets' ``(pred, gold)`` arrays.

    ``all`` resamples pairs within the concatenation (one Spearman over everything, as the score
    is computed); ``mean``/``wmean`` resample within each subset (seeded per subset name) and
    average the per-subset correlations per resample, unweighted or weighted by subset size.
    """
    if aggregation not in STS_AGGREGATIONS:
        raise InvalidInputError(f"unknown STS aggregation {aggregation!r}; expected one of {STS_AGGREGATIONS}")
    if not subsets:
        raise InvalidInputError("no subsets given")
    if aggregation == "all":
        pred = np.concatenate([np.asarray(p) for p, _ in subsets.values()])
        gold = np.concatenate([np.asarray(g) for _, g in subsets.values()])
        return bootstrap_spearman(pred, gold, n_resamples=n_resamples, seed=seed)
    parts = [
        bootstrap_spearman(pred, gold, n_resamples=n_resamples, seed=derive_seed(seed, name))
        for name, (pred, gold) in subsets.items()
    ]
    weights = [p.n for p in parts] if aggregation == "wmean" else None
    out = weighted_average(parts, weights, unit="pairs, resampled within each subset")
    return Replicates(estimate=out.estimate, values=out.values, unit=out.unit, n=out.n, seed=seed)


def _mean_rows(scale: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: scale * x.mean(axis=-1)


def bootstrap_mean(
    values: np.ndarray, *, unit: str, scale: float = 100.0, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Replicates:
    """Mean of per-unit values x ``scale``, resampling units: accuracy from 0/1 correctness per
    test item, MAP and MRR from per-query AP and RR (``unit="queries"``)."""
    (values,) = as_columns(values, names=("values",))
    values = values.astype(np.float64)
    reps = resample_statistic(_mean_rows(scale), (values,), n_resamples, np.random.default_rng(seed))
    return Replicates(estimate=scale * float(values.mean()), values=reps, unit=unit, n=len(values), seed=seed)


def bootstrap_accuracy(
    pred: np.ndarray, labels: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Replicates:
    """Test accuracy x100 from per-item predictions, resampling test items."""
    pred, labels = as_columns(pred, labels, names=("pred", "labels"))
    return bootstrap_mean(pred == labels, unit="test items", n_resamples=n_resamples, seed=seed)


def bootstrap_fold_mean(fold_scores: np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Replicates:
    """Mean over outer folds of per-fold scores (already x100), resampling the folds.

    This is SentEval's k-fold accuracy (MR, CR, SUBJ, MPQA). With 10 folds the bootstrap
    distribution takes few distinct values and ignores the variation within each fold's test
    items, so the interval is coarse (and tends to be narrow); it says how much the score moves
    with the fold split, not the full sampling error.
    """
    return bootstrap_mean(fold_scores, unit="outer folds", scale=1.0, n_resamples=n_resamples, seed=seed)


def bootstrap_f1(
    pred: np.ndarray, labels: np.ndarray, *, positive: object = 1, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Replicates:
    """Binary F1 x100 (MRPC) from per-item predictions, resampling test items."""
    pred, labels = as_columns(pred, labels, names=("pred", "labels"))
    values = resample_statistic(
        lambda p, t: f1_rows(p, t, positive), (pred, labels), n_resamples, np.random.default_rng(seed)
    )
    return Replicates(
        estimate=float(f1_rows(pred, labels, positive)), values=values, unit="test items", n=len(pred), seed=seed
    )
