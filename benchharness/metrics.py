"""Similarity and correlation code shared by the tasks (ranking metrics live in ``ranking``).

scipy is imported when a correlation is computed, so that importing the tasks (to list them) does
not pay for it.
"""

from __future__ import annotations

import numpy as np


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity; a pair with a zero vector scores 0 (SentEval maps NaN to 0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        sims = dots / denom
    return np.where(denom > 0, sims, 0.0)


def correlations(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman (scipy), x100 as the field reports them."""
    from scipy import stats

    return {
        "pearson": float(stats.pearsonr(pred, gold)[0]) * 100.0,
        "spearman": float(stats.spearmanr(pred, gold)[0]) * 100.0,
    }
