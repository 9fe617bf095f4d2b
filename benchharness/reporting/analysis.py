"""Geometry of an embedding space, from stored embeddings and STS-B outputs.

- ``alignment`` and ``uniformity``: Wang & Isola (2020), as SimCSE reports them (SimCSE Sec. 6 /
  Fig. 2): both on L2-normalised vectors, alignment ``E ||f(x) - f(y)||^2`` over positive pairs
  (``alpha = 2``), uniformity ``log E exp(-2 ||f(x) - f(y)||^2)`` over all pairs of distinct
  sentences (``t = 2``). SimCSE takes STS-B pairs with a gold score of 4 or more as positives
  (``positive_pairs``) and all STS-B sentences for uniformity. Lower is better for both.
- ``cosine_by_gold_level``: mean and variance of the pair cosine per STS-B gold level, PaSeR's
  Table 10 (Appendix C; levels 0-1, 1-2, 2-3, 3-4, 4-5). The paper does not say to which level a
  score on a boundary belongs; here levels are ``[k, k+1)`` except the last, ``[4, 5]``, so that
  every score in 0..5 has exactly one level. The variance is the population variance (ddof 0).
- Isotropy: ``mean_random_pair_cosine`` (the average cosine of random pairs of distinct
  sentences, seeded; near 0 for an isotropic space, large for the narrow cone of raw BERT) and
  ``top_pc_variance_share`` (the fraction of total variance on the top-k principal components).

Plot helpers (``plot_cosine_levels``, ``plot_alignment_uniformity``) import matplotlib with the
Agg backend only when called and write PNGs atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.atomic import atomic_file
from benchharness.core.errors import InvalidInputError

PASER_LEVEL_EDGES = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
SIMCSE_POSITIVE_THRESHOLD = 4.0
UNIFORMITY_BLOCK_ROWS = 1024


def _matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise InvalidInputError(f"{name} must be a non-empty (n, d) matrix of embeddings, got shape {x.shape}")
    return x


def normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm; a zero row is refused (it has no direction)."""
    x = _matrix(x, "embeddings")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    zero = np.flatnonzero(norms[:, 0] == 0)
    if len(zero):
        raise InvalidInputError(f"{len(zero)} zero vectors (rows {zero[:5].tolist()}...) cannot be normalised")
    return x / norms


def positive_pairs(gold: np.ndarray, threshold: float = SIMCSE_POSITIVE_THRESHOLD) -> np.ndarray:
    """Indices of the pairs whose gold score is at least ``threshold`` (SimCSE: STS-B, 4)."""
    return np.flatnonzero(np.asarray(gold, dtype=np.float64) >= threshold)


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ``||x_i - y_i||^alpha`` over positive pairs ``(x_i, y_i)`` of normalised vectors."""
    x, y = normalize(x), normalize(y)
    if x.shape != y.shape:
        raise InvalidInputError(f"alignment needs paired rows: shapes {x.shape} and {y.shape} differ")
    return float((np.linalg.norm(x - y, axis=1) ** alpha).mean())


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """``log`` of the mean of ``exp(-t ||x_i - x_j||^2)`` over all pairs i < j of normalised vectors.

    For unit vectors ``||x_i - x_j||^2 = 2 - 2 x_i.x_j``; the mean over the n(n-1)/2 pairs is
    accumulated in row blocks (memory O(block x n)) as a log-sum-exp, which stays finite where the
    exponentials would underflow.
    """
    x = normalize(x)
    n = len(x)
    if n < 2:
        raise InvalidInputError(f"uniformity needs at least 2 vectors, got {n}")
    log_terms = []
    for start in range(0, n - 1, UNIFORMITY_BLOCK_ROWS):
        stop = min(n - 1, start + UNIFORMITY_BLOCK_ROWS)
        sq = np.maximum(2.0 - 2.0 * x[start:stop] @ x.T, 0.0)
        upper = np.arange(n)[None, :] > np.arange(start, stop)[:, None]
        exponents = -t * sq[upper]
        top = exponents.max()
        log_terms.append(top + np.log(np.exp(exponents - top).sum()))
    terms = np.asarray(log_terms)
    top = terms.max()
    return float(top + np.log(np.exp(terms - top).sum()) - np.log(n * (n - 1) / 2))


def gold_levels(gold: np.ndarray, edges: Sequence[float] | np.ndarray = PASER_LEVEL_EDGES) -> np.ndarray:
    """Level index of each gold score: ``k`` for ``[edges[k], edges[k+1])``, the last level closed."""
    gold = np.asarray(gold, dtype=np.float64)
    bounds = np.asarray(edges, dtype=np.float64)
    if bounds.ndim != 1 or len(bounds) < 2 or np.any(np.diff(bounds) <= 0):
        raise InvalidInputError(f"level edges must increase strictly, got {bounds.tolist()}")
    outside = np.flatnonzero((gold < bounds[0]) | (gold > bounds[-1]) | np.isnan(gold))
    if len(outside):
        raise InvalidInputError(
            f"{len(outside)} gold scores lie outside [{bounds[0]:g}, {bounds[-1]:g}], e.g. pair "
            f"{outside[0]} with {gold[outside[0]]}"
        )
    return np.minimum(np.searchsorted(bounds, gold, side="right") - 1, len(bounds) - 2)


@dataclass(frozen=True)
class LevelStats:
    """Cosine statistics for the pairs whose gold score falls in ``[low, high)`` (last: ``[low, high]``)."""

    level: str
    low: float
    high: float
    n: int
    mean: float
    var: float


def cosine_by_gold_level(
    cosine: np.ndarray, gold: np.ndarray, edges: Sequence[float] = PASER_LEVEL_EDGES
) -> list[LevelStats]:
    """Mean and population variance of the pair cosine per gold level (PaSeR, Table 10).

    A level with no pair gets NaN mean and variance and ``n = 0``; a gold score outside the edges
    is an error (it would silently drop pairs).
    """
    cosine = np.asarray(cosine, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if cosine.shape != gold.shape or cosine.ndim != 1:
        raise InvalidInputError(f"cosine and gold must be 1-D of equal length, got {cosine.shape} and {gold.shape}")
    bounds = np.asarray(edges, dtype=np.float64)
    level = gold_levels(gold, bounds)
    out = []
    for k in range(len(bounds) - 1):
        vals = cosine[level == k]
        mean, var = (float(vals.mean()), float(vals.var())) if len(vals) else (float("nan"), float("nan"))
        out.append(
            LevelStats(
                level=f"{bounds[k]:g}-{bounds[k + 1]:g}",
                low=float(bounds[k]),
                high=float(bounds[k + 1]),
                n=len(vals),
                mean=mean,
                var=var,
            )
        )
    return out


def mean_random_pair_cosine(x: np.ndarray, n_pairs: int = 100_000, seed: int = 0) -> float:
    """Average cosine of ``n_pairs`` pairs of distinct rows drawn uniformly with a seeded generator."""
    x = normalize(x)
    n = len(x)
    if n < 2 or n_pairs < 1:
        raise InvalidInputError(f"need at least 2 vectors and 1 pair, got {n} vectors and n_pairs={n_pairs}")
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + rng.integers(1, n, size=n_pairs)) % n  # uniform over the other n - 1 rows
    return float(np.einsum("ij,ij->i", x[i], x[j]).mean())


def top_pc_variance_share(x: np.ndarray, k: int = 1) -> float:
    """Share of the total variance carried by the top ``k`` principal components (centred data)."""
    x = _matrix(x, "embeddings")
    if not 1 <= k <= min(x.shape):
        raise InvalidInputError(f"k must lie in 1..{min(x.shape)} for a {x.shape} matrix, got {k}")
    s2 = np.linalg.svd(x - x.mean(axis=0), compute_uv=False) ** 2
    total = s2.sum()
    if total == 0:
        raise InvalidInputError("all embeddings are identical: the variance share is undefined")
    return float(s2[:k].sum() / total)


def pyplot_agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: figure formats ``benchharness analyze`` writes: PNG for screens, SVG and PDF for papers
FIGURE_FORMATS = ("png", "svg", "pdf")


def _save(fig, path: str | Path) -> Path:
    """Write ``fig`` in the format its suffix names (png, svg, pdf), atomically."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FIGURE_FORMATS:
        raise InvalidInputError(f"{path}: figures are written as {', '.join(FIGURE_FORMATS)}")
    with atomic_file(path, "wb") as fh:
        # the date in PDF/SVG metadata would make every rewrite differ
        fig.savefig(
            fh,
            format=fmt,
            dpi=150,
            bbox_inches="tight",
            metadata={"png": {}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt],
        )
    return path


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` as ``_save`` does, then close it (pyplot keeps every open figure alive)."""
    try:
        return _save(fig, path)
    finally:
        pyplot_agg().close(fig)


def plot_cosine_levels(
    cosines: Mapping[str, np.ndarray],
    gold: np.ndarray,
    path: str | Path,
    title: str = "",
    edges: Sequence[float] = PASER_LEVEL_EDGES,
) -> Path:
    """Density of the pair cosine per gold level (rows, as PaSeR's Fig. 5), one column per encoder, on
    shared axes so that encoders compare at a glance: a good encoder moves its mass right as the
    gold level rises."""
    plt = pyplot_agg()
    if not cosines:
        raise InvalidInputError("no encoders to plot")
    names = list(cosines)
    level = gold_levels(gold, edges)
    stats = cosine_by_gold_level(np.asarray(cosines[names[0]], dtype=np.float64), gold, edges)
    low = min(-0.1, *(float(np.min(c)) for c in cosines.values()))
    bins = np.linspace(low, 1.0, 41)
    fig, axes = plt.subplots(
        len(stats),
        len(names),
        figsize=(2.6 * len(names) + 0.8, 1.15 * len(stats) + 0.6),
        sharex=True,
        sharey="col",
        squeeze=False,
    )
    for j, name in enumerate(names):
        cosine = np.asarray(cosines[name], dtype=np.float64)
        for k, st in enumerate(stats):
            ax = axes[k, j]
            ax.hist(cosine[level == k], bins=bins, density=True, color=f"C{j}", alpha=0.75)
            ax.axvline(float(cosine[level == k].mean()), color="black", linewidth=0.8)
            if j == 0:
                ax.set_ylabel(f"gold {st.level}\ndensity", fontsize=8)
        axes[0, j].set_title(name, fontsize=9)
        axes[-1, j].set_xlabel("cosine similarity")
    if title:
        fig.suptitle(title)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_alignment_uniformity(points: Mapping[str, tuple[float, float]], path: str | Path) -> Path:
    """The alignment-uniformity plane, one point per encoder, uniformity on the x axis and alignment
    on the y axis as in SimCSE's Fig. 2 (lower left is better)."""
    if not points:
        raise InvalidInputError("no encoders to plot")
    plt = pyplot_agg()
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for j, (name, (align, unif)) in enumerate(points.items()):
        ax.scatter([unif], [align], color=f"C{j}", label=name)
        ax.annotate(name, (unif, align), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel(r"$\ell_{uniform}$")
    ax.set_ylabel(r"$\ell_{align}$")
    ax.margins(0.15)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
