"""Similarity and correlation code shared by the tasks (ranking metrics live in ``ranking``).

Pearson and Spearman are computed in NumPy by the very operations ``scipy.stats.pearsonr`` and
``scipy.stats.spearmanr`` perform on two 1-D float arrays (scipy 1.17), so they give the same
floats bit for bit (``tests/unit/scoring/test_metrics.py`` checks it against scipy, and every stored STS
result was re-scored with both), while a run that only scores needs no scipy import: importing
``scipy.stats`` took 1.1-1.6 s, most of the 2 s a warm rerun may take (the target). scipy's checks
are kept: a constant input gives NaN with a warning (logged, where scipy warns), an input holding NaN
gives NaN. ``correlations``, the scores tasks store, refuses both instead (``UndefinedCorrelationError``):
a NaN score says nothing and no result file can hold it.
"""

from __future__ import annotations

import logging

import numpy as np

from benchharness.core.errors import InvalidInputError

logger = logging.getLogger(__name__)


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity; a pair with a zero vector scores 0 (SentEval maps NaN to 0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        sims = dots / denom
    return np.where(denom > 0, sims, 0.0)


CONSTANT_INPUT = "An input array is constant; the correlation coefficient is not defined."


def _pair(x: np.ndarray, y: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1 or len(x) != len(y):
        raise InvalidInputError(f"{what}: two 1-D arrays of one length expected, got shapes {x.shape} and {y.shape}")
    return x, y


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """``scipy.stats.pearsonr(x, y).statistic`` of two 1-D arrays, by scipy's own steps: centre,
    scale each by its largest deviation, norms, dot product of the normalised vectors, clip."""
    x, y = _pair(x, y, "pearson")
    if len(x) < 2:
        raise InvalidInputError("pearson: x and y must have length at least 2")
    dtype = np.result_type(x, y)
    if not np.issubdtype(dtype, np.inexact):  # scipy promotes integers to the default float
        dtype = np.dtype(np.float64)
    x, y = x.astype(dtype, copy=False), y.astype(dtype, copy=False)
    if (x == x[0]).all() or (y == y[0]).all():
        logger.warning(CONSTANT_INPUT)
        return float("nan")
    xmean = np.mean(x, axis=-1, keepdims=True)
    ymean = np.mean(y, axis=-1, keepdims=True)
    xm = x - xmean
    ym = y - ymean
    xmax = np.max(np.abs(xm), axis=-1, keepdims=True)
    ymax = np.max(np.abs(ym), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normxm = xmax * np.linalg.norm(xm / xmax, ord=2, axis=-1, keepdims=True)
        normym = ymax * np.linalg.norm(ym / ymax, ord=2, axis=-1, keepdims=True)
        r = np.vecdot(xm / normxm, ym / normym, axis=-1)  # type: ignore[call-overload]  # numpy's stub lacks a gufunc's axis=
    r = np.where(r > 1.0, 1.0, np.where(r < -1.0, -1.0, r))  # NaN stays NaN, as in scipy's clip
    if len(x) == 2:
        r = np.round(r)
    return float(r)


def rank_average(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank (``scipy.stats.rankdata``): every rank is an
    integer or half-integer, exact in float64, so any correct computation gives scipy's floats."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    group = np.cumsum(first) - 1  # tie group of each position in sorted order
    starts = np.r_[np.flatnonzero(first), len(values)]  # 0-based start of each group, then the end
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = 0.5 * (starts[group] + starts[group + 1] + 1)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """``scipy.stats.spearmanr(x, y).statistic`` of two 1-D arrays, by scipy's own steps: the two
    columns ranked (``np.apply_along_axis``), then ``np.corrcoef`` of the ranked columns."""
    x, y = _pair(x, y, "spearman")
    a = np.column_stack((x, y))
    if a.shape[0] <= 1:
        return float("nan")
    if (a[:, 0][0] == a[:, 0]).all() or (a[:, 1][0] == a[:, 1]).all():
        logger.warning(CONSTANT_INPUT)
        return float("nan")
    if np.issubdtype(a.dtype, np.floating) and np.isnan(np.max(a)):
        return float("nan")  # nan_policy='propagate'
    ranked = np.apply_along_axis(rank_average, 0, a)
    return float(np.corrcoef(ranked, rowvar=False)[1, 0])


class UndefinedCorrelationError(InvalidInputError):
    """A correlation that has no value: one side is constant (0/0) or holds a NaN."""


def constant_value(values: np.ndarray) -> float | None:
    """The one value every element of ``values`` equals, or None when there are two or more (or none)."""
    values = np.asarray(values)
    if values.size == 0 or not (values == values.flat[0]).all():
        return None
    return float(values.flat[0])


def correlations(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman (scipy's values, computed in NumPy), x100 as the field reports them.

    Where scipy would give NaN, this raises ``UndefinedCorrelationError`` saying why (which side is
    constant, at which value): a caller that knows the file or the encoder adds it, and no NaN
    becomes a score."""
    x, y = _pair(pred, gold, "correlations")
    for what, values in (("predicted similarities", x), ("gold scores", y)):
        value = constant_value(values)
        if value is not None:
            raise UndefinedCorrelationError(f"the {what} are all {value}: a correlation with a constant is undefined")
    for what, values in (("predicted similarities", x), ("gold scores", y)):
        if np.issubdtype(values.dtype, np.floating) and not np.isfinite(values).all():
            raise UndefinedCorrelationError(
                f"the {what} hold {int((~np.isfinite(values)).sum())} non-finite value(s): the correlation is undefined"
            )
    return {
        "pearson": pearson(x, y) * 100.0,
        "spearman": spearman(x, y) * 100.0,
    }
