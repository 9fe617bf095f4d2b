"""Top lists made from other lists or from a score per document: a first stage's candidates
reranked by a second model's scores, first stages fused by reciprocal rank, the best documents of a
row of scores. Each result is a ``Ranked`` pair of arrays as ``View.search`` returns them: scores and
corpus indices, one row per query, best first, padded with score -inf and index -1.

Ties: a reranked list orders equal scores by the first stage's rank (its order is the information
the reranker did not override); a fused list and a row of scores by corpus order, the shared rule
of ``scoring.ranking``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def padded(rows: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Lists of at most ``k`` (scores, indices) as two arrays of ``k`` columns, padded."""
    scores = np.full((len(rows), k), -np.inf, dtype=np.float64)
    ids = np.full((len(rows), k), -1, dtype=np.int64)
    for i, (row_scores, row_ids) in enumerate(rows):
        n = min(k, len(row_ids))
        scores[i, :n], ids[i, :n] = row_scores[:n], row_ids[:n]
    return scores, ids


def listed(ids: np.ndarray) -> list[np.ndarray]:
    """Each row's corpus indices, padding dropped."""
    return [row[row >= 0] for row in np.asarray(ids)]


def best_of_row(scores: np.ndarray, k: int, exclude: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best documents of one row of scores over the whole corpus, by (score desc, index
    asc), ``exclude`` left out: the k-th best score is found by partition, and only the documents
    scoring at least that much are sorted (every tie at the boundary included, so the cut follows the
    tie rule)."""
    scores = np.asarray(scores, dtype=np.float64)
    if 0 <= exclude < len(scores):
        scores = scores.copy()
        scores[exclude] = -np.inf
    n = min(k, int(np.isfinite(scores).sum()))
    if n == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    kth = np.partition(scores, len(scores) - n)[len(scores) - n]
    chosen = np.flatnonzero(scores >= kth)
    order = np.lexsort((chosen, -scores[chosen]))[:n]
    return scores[chosen[order]], chosen[order].astype(np.int64)


def reranked(candidates: Sequence[np.ndarray], scores: Sequence[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``candidates`` (corpus indices in first-stage order) ordered by the second
    model's ``scores`` of them, descending, ties by first-stage rank; the best ``k`` kept."""
    rows = []
    for ids, row in zip(candidates, scores):
        row = np.asarray(row, dtype=np.float64)
        order = np.lexsort((np.arange(len(ids)), -row))
        rows.append((row[order], np.asarray(ids, dtype=np.int64)[order]))
    return padded(rows, k)


def reciprocal_rank_fusion(lists: Sequence[np.ndarray], constant: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal-rank fusion of first stages' top lists (``lists[m]``: member m's corpus indices, one
    row per query, best first, -1 padding): a document scores the sum over members of
    ``1 / (constant + rank)``, ranks from 1, nothing from a member that did not list it; the best
    ``k`` by (fused score desc, corpus order)."""
    n_queries = len(lists[0]) if lists else 0
    rows = []
    for q in range(n_queries):
        fused: dict[int, float] = {}
        for member in lists:
            for rank, doc in enumerate(int(d) for d in member[q] if d >= 0):
                fused[doc] = fused.get(doc, 0.0) + 1.0 / (constant + rank + 1)
        ids = np.fromiter(fused, dtype=np.int64, count=len(fused))
        values = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
        order = np.lexsort((ids, -values))
        rows.append((values[order], ids[order]))
    return padded(rows, k)
