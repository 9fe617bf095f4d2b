"""Retrieval metrics with graded relevance, as pytrec_eval (trec_eval) defines them: the numbers
BEIR and mteb report for a retrieval task, so that a BEIR folder scored here reads like theirs.

Each metric takes the ranked list's *gains*: the relevance score of the document at each rank,
best first, 0 for a document that is not relevant (score 0 or below, or not judged) and for the
padding of a list shorter than the cutoff. ``n_relevant`` / ``ideal`` describe every relevant
document of the query, retrieved or not. Definitions (trec_eval's measures in brackets):

- ``ndcg_at`` (``ndcg_cut.k``): DCG@k / IDCG@k with gain = the relevance score (linear, not
  2^rel - 1) and discount 1 / log2(rank + 1); the ideal ranking orders all relevant documents by
  score; 0 when the query has none;
- ``map_at`` (``map_cut.k``): the sum of precision@rank over the relevant documents within the
  top k, divided by the number of relevant documents (all of them: unlike
  ``benchharness.scoring.ranking``'s MAP@k for QQP, which divides by min(k, relevant) as
  sentence-transformers does);
- ``recall_at`` (``recall.k``): relevant documents within the top k / relevant documents;
- MRR@k is ``ranking.reciprocal_rank`` on ``gains > 0`` (mteb's own MRR, which pytrec_eval's
  ``recip_rank`` lacks a cutoff for).

Ranking, hence ties, is the caller's (``benchharness.scoring.top_k``: score descending, then
corpus order; trec_eval orders tied scores by document id, descending).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.scoring.ranking import average_precision, reciprocal_rank


def _discounts(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def ndcg_at(gains: np.ndarray, ideal: np.ndarray, k: int) -> float:
    """nDCG@k of a ranked list's ``gains`` against the relevance scores ``ideal`` of every relevant
    document of the query."""
    top = np.clip(np.asarray(gains, dtype=np.float64)[:k], 0, None)
    best = np.sort(np.clip(np.asarray(ideal, dtype=np.float64), 0, None))[::-1][:k]
    idcg = float((best * _discounts(len(best))).sum())
    return float((top * _discounts(len(top))).sum()) / idcg if idcg > 0 else 0.0


def map_at(gains: np.ndarray, k: int, n_relevant: int) -> float:
    """AP@k, trec_eval's: precision at each relevant rank within k, summed, / ``n_relevant``."""
    return average_precision(np.asarray(gains)[:k] > 0, n_relevant=n_relevant)


def recall_at(gains: np.ndarray, k: int, n_relevant: int) -> float:
    """Relevant documents within the top k / ``n_relevant``."""
    return float((np.asarray(gains)[:k] > 0).sum()) / n_relevant if n_relevant else 0.0


def retrieval_per_query(
    ranked_gains: Iterable[np.ndarray],
    ideal: Iterable[np.ndarray],
    ndcg_k: int = 10,
    map_k: int = 100,
    mrr_k: int = 10,
    recall_k: int = 100,
) -> dict[str, np.ndarray]:
    """Per query, as fractions: ``ndcg@k``, ``map@k``, ``mrr@k``, ``recall@k`` (the items whose
    means, x100, are the metrics; intervals and paired tests resample queries)."""
    out: dict[str, list[float]] = {
        f"ndcg@{ndcg_k}": [],
        f"map@{map_k}": [],
        f"mrr@{mrr_k}": [],
        f"recall@{recall_k}": [],
    }
    for gains, rel in zip(ranked_gains, ideal, strict=True):
        n = int((np.asarray(rel) > 0).sum())
        out[f"ndcg@{ndcg_k}"].append(ndcg_at(gains, rel, ndcg_k))
        out[f"map@{map_k}"].append(map_at(gains, map_k, n))
        out[f"mrr@{mrr_k}"].append(reciprocal_rank(np.asarray(gains) > 0, mrr_k))
        out[f"recall@{recall_k}"].append(recall_at(gains, recall_k, n))
    if not out[f"ndcg@{ndcg_k}"]:
        raise InvalidInputError("no queries to score")
    return {key: np.asarray(values, dtype=np.float64) for key, values in out.items()}
