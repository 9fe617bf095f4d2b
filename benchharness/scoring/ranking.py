"""Ranking metrics shared by the reranking (AskUbuntu) and retrieval (QQP) tasks.

Every metric takes a *ranked* relevance list (1 = relevant, best first), produced by ``rank``,
so that the tie rule lives in one place: candidates are sorted by score, highest first, and equal
scores keep their input order (for AskUbuntu that order is the BM25 ranking, as in the useb/TSDAE
evaluation; for QQP it is corpus order). Conventions, chosen to match the reference code:

- ``average_precision``: mean of precision@i over the ranks i of the relevant items found in the
  list (the TSDAE/useb AskUbuntu AP). With ``n_relevant`` (relevant items that exist, found or
  not) and a cutoff ``k``, the sum is divided by ``min(k, n_relevant)`` instead, as
  sentence-transformers' ``InformationRetrievalEvaluator`` computes MAP@k;
- a list without any relevant item scores 0 on every metric (tasks drop such queries first when
  their protocol says so);
- ``reciprocal_rank``: 1 / rank of the first relevant item within the cutoff, else 0;
- ``precision_at``: relevant items among the first k, divided by k (also when the list is shorter).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from benchharness.core.errors import InvalidInputError


def rank(scores: np.ndarray) -> np.ndarray:
    """Indices that sort ``scores`` highest first; ties keep their input order (stable)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def ranked_relevance(scores: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """The 0/1 relevance of the candidates in ranked order."""
    return np.asarray(relevant, dtype=bool)[rank(scores)]


def average_precision(rel: np.ndarray, k: int | None = None, n_relevant: int | None = None) -> float:
    rel = np.asarray(rel, dtype=bool)[:k]
    hits = np.flatnonzero(rel)
    if n_relevant is None:
        denom = len(hits)
    else:
        denom = min(n_relevant, k) if k is not None else n_relevant
    if denom == 0 or len(hits) == 0:
        return 0.0
    precisions = np.arange(1, len(hits) + 1) / (hits + 1)
    return float(precisions.sum() / denom)


def reciprocal_rank(rel: np.ndarray, k: int | None = None) -> float:
    hits = np.flatnonzero(np.asarray(rel, dtype=bool)[:k])
    return 1.0 / (hits[0] + 1) if len(hits) else 0.0


def precision_at(rel: np.ndarray, k: int) -> float:
    return float(np.asarray(rel, dtype=bool)[:k].sum()) / k


def per_query_metrics(
    rankings: Iterable[np.ndarray],
    ks_mrr: tuple[int, ...] = (10,),
    ks_p: tuple[int, ...] = (1, 5),
    map_k: int | None = None,
    n_relevant: Iterable[int] | None = None,
) -> dict[str, np.ndarray]:
    """Per query, as fractions: ``map`` (or ``map@k``: the query's AP), ``mrr``, ``mrr@k``, ``p@k``.

    These are what ``means`` averages; they are kept per query so that intervals and paired
    tests resample queries.
    """
    rankings = list(rankings)
    if not rankings:
        raise InvalidInputError("no queries to score")
    totals = list(n_relevant) if n_relevant is not None else [None] * len(rankings)
    map_key = "map" if map_k is None else f"map@{map_k}"
    out = {
        map_key: np.array([average_precision(r, map_k, n) for r, n in zip(rankings, totals)]),
        "mrr": np.array([reciprocal_rank(r) for r in rankings]),
    }
    for k in ks_mrr:
        out[f"mrr@{k}"] = np.array([reciprocal_rank(r, k) for r in rankings])
    for k in ks_p:
        out[f"p@{k}"] = np.array([precision_at(r, k) for r in rankings])
    return out


def means(per_query: dict[str, np.ndarray]) -> dict[str, float]:
    """Each per-query metric's mean x100."""
    return {key: float(100.0 * np.mean(v)) for key, v in per_query.items()}
