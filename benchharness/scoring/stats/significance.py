"""Closed-form tests that cross-check the resampling ones, and Holm's correction across tasks.

- Steiger's (1980) Z for two dependent correlations sharing a variable: for STS, the gold is
  shared, so Spearman(gold, A) and Spearman(gold, B) are compared given Spearman(A, B).
- McNemar's test on paired test-set predictions (transfer): only the items where exactly one of
  the two systems is right carry information.
- Holm's (1979) step-down adjustment, for a family of comparisons (one per task).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.scoring.metrics import spearman
from benchharness.scoring.stats.bootstrap import as_columns


@dataclass(frozen=True)
class SteigerResult:
    """Steiger's Z for r(gold, A) = r(gold, B) given r(A, B); two-sided normal p-value."""

    z: float
    p_value: float
    r_gold_a: float
    r_gold_b: float
    r_a_b: float
    n: int


def steiger_z(r_gold_a: float, r_gold_b: float, r_a_b: float, n: int) -> SteigerResult:
    """Steiger's (1980) test of H0: rho(j,k) = rho(j,h) for correlations sharing variable j.

    Correlations on the -1..1 scale (not x100). Both correlations are Fisher-transformed; the
    covariance of the transforms is Steiger's equation with the pooled estimate
    ``r_bar = (r_gold_a + r_gold_b) / 2`` in place of the two correlations under the null:

        psi = r_ab (1 - 2 r_bar^2) - r_bar^2 (1 - 2 r_bar^2 - r_ab^2) / 2
        c   = psi / (1 - r_bar^2)^2
        Z   = (atanh r_gold_a - atanh r_gold_b) sqrt(n - 3) / sqrt(2 - 2 c)
    """
    for name, r in (("r_gold_a", r_gold_a), ("r_gold_b", r_gold_b), ("r_a_b", r_a_b)):
        if not -1.0 < r < 1.0 or math.isnan(r):
            raise InvalidInputError(f"{name} must be a correlation strictly between -1 and 1, got {r!r}")
    if n <= 3:
        raise InvalidInputError(f"Steiger's test needs n > 3 items, got n={n}")
    r_bar = (r_gold_a + r_gold_b) / 2.0
    r2 = r_bar * r_bar
    psi = r_a_b * (1.0 - 2.0 * r2) - 0.5 * r2 * (1.0 - 2.0 * r2 - r_a_b * r_a_b)
    c = psi / (1.0 - r2) ** 2
    z = (math.atanh(r_gold_a) - math.atanh(r_gold_b)) * math.sqrt(n - 3) / math.sqrt(2.0 - 2.0 * c)
    return SteigerResult(
        z=z, p_value=math.erfc(abs(z) / math.sqrt(2.0)), r_gold_a=r_gold_a, r_gold_b=r_gold_b, r_a_b=r_a_b, n=n
    )


def steiger_spearman(pred_a: np.ndarray, pred_b: np.ndarray, gold: np.ndarray) -> SteigerResult:
    """Steiger's Z on Spearman correlations of two systems' similarities with a shared gold.

    Steiger's variance formula is derived for Pearson correlations of normal variables; applied to
    Spearman's rho (a Pearson correlation of ranks) it is an approximation, which is why it serves
    as a cross-check beside the permutation test rather than as the test itself.
    """
    pred_a, pred_b, gold = as_columns(pred_a, pred_b, gold, names=("pred_a", "pred_b", "gold"))
    return steiger_z(spearman(gold, pred_a), spearman(gold, pred_b), spearman(pred_a, pred_b), len(gold))


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test: ``a_only`` items only A gets right, ``b_only`` items only B gets right."""

    a_only: int
    b_only: int
    statistic: float
    p_value: float
    method: str


def mcnemar(
    pred_a: np.ndarray, pred_b: np.ndarray, labels: np.ndarray, *, exact: bool = True, correction: bool = True
) -> McNemarResult:
    """McNemar's test of equal accuracy for two classifiers on the same test items.

    ``exact``: two-sided binomial test of ``a_only`` successes in ``a_only + b_only`` trials at
    p = 1/2 (the statistic reported is ``min(a_only, b_only)``); otherwise the chi-square statistic
    ``(|a_only - b_only| - 1)^2 / (a_only + b_only)`` with one degree of freedom, without the ``- 1``
    when ``correction`` is False. With no discordant item the two systems cannot be told apart:
    p = 1.
    """
    from scipy.stats import binomtest, chi2  # exact and asymptotic tails

    pred_a, pred_b, labels = as_columns(pred_a, pred_b, labels, names=("pred_a", "pred_b", "labels"))
    right_a, right_b = pred_a == labels, pred_b == labels
    b, c = int((right_a & ~right_b).sum()), int((~right_a & right_b).sum())
    if exact:
        p = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
        return McNemarResult(a_only=b, b_only=c, statistic=float(min(b, c)), p_value=float(p), method="exact binomial")
    if b + c == 0:
        return McNemarResult(a_only=b, b_only=c, statistic=0.0, p_value=1.0, method="chi-square")
    diff = abs(b - c) - (1.0 if correction else 0.0)
    stat = max(diff, 0.0) ** 2 / (b + c)
    method = "chi-square, continuity-corrected" if correction else "chi-square"
    return McNemarResult(a_only=b, b_only=c, statistic=stat, p_value=float(chi2.sf(stat, 1)), method=method)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    Sorted ascending, the i-th smallest (0-based) is multiplied by ``m - i``; a running maximum
    keeps the adjusted values monotone, and they are capped at 1. Rejecting where the adjusted p is
    at most alpha controls the family-wise error rate at alpha.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise InvalidInputError(f"p-values must be a flat sequence of numbers in [0, 1], got {list(p_values)!r}")
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted.tolist()
