"""Statistics evaluated on many resamples at once: row ``i`` of a ``(B, n)`` matrix is resample ``i``.

Bootstrap and permutation tests need the same statistic thousands of times; computing it row-wise
on a whole block of resamples (one ``rankdata`` call, one reduction) instead of in a Python loop is
what makes the target reachable: 1,000 resamples of a 3,750-pair STS task in under a
second on one core. Blocks are bounded by ``ROW_BLOCK_ELEMENTS`` cells (summed over the resampled
arrays) so that memory stays small whatever ``B`` and ``n`` are: about 1M cells, i.e. ~8 MiB per
float64 temporary, a few tens of MiB at peak for a Spearman block with its ranks and centred copies.
A bootstrap Spearman ranks each block ``RANK_ROWS`` rows at a time (``spearman_resamples``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

ROW_BLOCK_ELEMENTS = 1 << 20
#: rows ranked and correlated together within a block: small enough that the count table and
#: every temporary of a few thousand pairs stay in the CPU's L2 cache (2.5x faster than whole
#: blocks for STS-sized tasks); rows are independent, so the values do not depend on it
RANK_ROWS = 32


def row_blocks(n_rows: int, row_length: int, budget: int = ROW_BLOCK_ELEMENTS) -> Iterator[slice]:
    """Slices of ``range(n_rows)`` whose blocks hold at most ``budget`` cells (at least one row)."""
    step = max(1, budget // max(1, row_length))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


def pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of ``x`` with the matching row of ``y`` (or with ``y`` if 1-D).

    A row with no variance gives NaN, as ``scipy.stats.pearsonr`` does.
    """
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    num = (xc * yc).sum(axis=-1)
    den = np.sqrt((xc * xc).sum(axis=-1) * (yc * yc).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho x100 per row: Pearson's r of average ranks, as ``scipy.stats.spearmanr``.

    ``y`` may be 1-D (one gold vector shared by every row); it is then ranked once.
    """
    from scipy.stats import rankdata  # scipy only where resamples are ranked: the leaderboard needs none

    return 100.0 * pearson_rows(rankdata(x, axis=-1), rankdata(y, axis=-1))


#: resamples of up to this many items get their Spearman from integer sums (``spearman_resamples``)
EXACT_ITEMS = 200_000  # n**3 < 2**53: every sum of products of (twice) centred ranks is exact


def spearman_resamples(
    x_groups: tuple[np.ndarray, int], y_groups: tuple[np.ndarray, int], idx: np.ndarray
) -> np.ndarray:
    """Spearman's rho x100 of each resample ``idx[i]`` of two paired arrays given by their
    ``tie_groups``: ``100 * pearson_rows`` of the resamples' average ranks, ``RANK_ROWS`` rows at
    a time, computed from integers.

    Every number ``pearson_rows`` forms from such ranks before its square root is exact in
    float64: ranks are half-integers, the mean rank of any ``n`` items is ``(n + 1) / 2``, so the
    centred ranks are half-integers, their products quarter-integers and the sums of those below
    ``n**3 / 4``, all exactly representable while ``n**3 < 2**53`` (whatever the order of
    summation). Twice the centred ranks are integers, so the three sums are taken in int64 and
    divided by 4, giving those same floats, and the last steps (square root, division) are
    ``pearson_rows``'s own: the values are identical bit for bit, without the float rank
    matrices or the means (1.5x faster). Larger resamples go through ``pearson_rows`` itself.
    """
    rows, n = idx.shape
    out = np.empty(rows, dtype=np.float64)
    for start in range(0, rows, RANK_ROWS):
        part = idx[start : start + RANK_ROWS]
        if n > EXACT_ITEMS:
            r = pearson_rows(resampled_ranks(*x_groups, part), resampled_ranks(*y_groups, part))
        else:
            tx = twice_ranks(*x_groups, part)
            tx -= n + 1  # twice (rank - mean rank)
            ty = twice_ranks(*y_groups, part)
            ty -= n + 1
            num = np.einsum("ij,ij->i", tx, ty) / 4.0
            den = np.sqrt((np.einsum("ij,ij->i", tx, tx) / 4.0) * (np.einsum("ij,ij->i", ty, ty) / 4.0))
            with np.errstate(invalid="ignore", divide="ignore"):
                r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        out[start : start + len(part)] = 100.0 * r
    return out


def tie_groups(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each item's tie group (the index of its value among the sorted distinct values) and the
    number of groups: what a resample's ranks are computed from without sorting it again."""
    distinct, groups = np.unique(values, return_inverse=True)
    return groups.ravel(), len(distinct)


def twice_ranks(groups: np.ndarray, n_groups: int, idx: np.ndarray) -> np.ndarray:
    """Twice the average ranks of ``values[idx]`` row by row (int64): see ``resampled_ranks``."""
    rows, _ = idx.shape
    flat = groups[idx]  # each item's group, offset below by its row's block of the count table
    flat += (n_groups * np.arange(rows))[:, None]
    counts = np.bincount(flat.ravel(), minlength=rows * n_groups).reshape(rows, n_groups)
    twice = np.cumsum(counts, axis=1)
    twice *= 2
    twice -= counts
    twice += 1  # 2 x cumulative - count + 1
    return np.take(twice.ravel(), flat)


def resampled_ranks(groups: np.ndarray, n_groups: int, idx: np.ndarray) -> np.ndarray:
    """Average ranks (``rankdata``'s, ties averaged) of ``values[idx]`` row by row, by counting.

    A resample holds copies of the original items, so its order is the order of their tie groups:
    count each group's members per row (one ``bincount``), accumulate the counts along the groups,
    and a group's average rank is ``cumulative - (count - 1) / 2``. That is O(rows x (n + groups))
    with no sort, several times faster than ranking each resampled row. The table is kept in
    integers (twice the rank, ``twice_ranks``) and read with one flat ``take``; halving it is
    exact, so the ranks are the same floats whatever the arithmetic.
    """
    ranks = twice_ranks(groups, n_groups, idx).astype(np.float64)
    ranks *= 0.5
    return ranks


def f1_rows(pred: np.ndarray, labels: np.ndarray, positive: object = 1) -> np.ndarray:
    """Binary F1 x100 per row, 2TP / (2TP + FP + FN); 0 when there is no positive at all
    (``sklearn.metrics.f1_score``'s value for that case)."""
    p = pred == positive
    t = labels == positive
    tp = (p & t).sum(axis=-1)
    denom = p.sum(axis=-1) + t.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 200.0 * tp / np.where(denom > 0, denom, 1), 0.0)
