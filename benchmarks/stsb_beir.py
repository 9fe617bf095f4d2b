"""STS-B test as a BEIR folder, and pytrec_eval's values on a retrieval task's own rankings: shared by
``benchmarks/beir_stsb.py`` and ``tests/fidelity/test_beir_pytrec.py``.

The folder: each distinct first sentence of a pair is a query, the corpus holds every distinct
second sentence, and a pair whose gold score is at least 4 makes its second sentence relevant
(relevance 1) to its first; queries with no such pair are in ``queries.jsonl`` but judged by no
qrels line, so they are not scored.

The cross-check: pytrec_eval gets the very scores and lists the task ranked (each query's top 100
from ``FileRetrievalTask.search``, cosines as float) and computes ``ndcg_cut.10``, ``map_cut.100``,
``recall.100`` and, on each list's first 10, ``recip_rank`` (= MRR@10). trec_eval orders tied scores
by document id, descending; the documents are named for it so that this is corpus order, the
task's rule, so the two rankings agree even where scores tie.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

RELEVANT_FROM = 4.0


def write_stsb_beir(
    folder: Path, first: list[str], second: list[str], gold: np.ndarray, threshold: float = RELEVANT_FROM
) -> dict[str, int]:
    """Write the folder (see the module docstring); return its counts."""
    queries = list(dict.fromkeys(first))
    corpus = list(dict.fromkeys(second))
    qid = {s: f"q{i}" for i, s in enumerate(queries)}
    did = {s: f"d{i}" for i, s in enumerate(corpus)}
    qrels = list(dict.fromkeys((qid[a], did[b]) for a, b, g in zip(first, second, gold) if g >= threshold))
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": did[s], "title": "", "text": s}) + "\n" for s in corpus)
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": qid[s], "text": s}) + "\n" for s in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels)
    )
    return {
        "pairs": len(first),
        "queries": len(queries),
        "corpus": len(corpus),
        "relevant_pairs": len(qrels),
        "judged_queries": len({q for q, _ in qrels}),
    }


def encoded_once(encoder, task) -> Callable[..., np.ndarray]:
    """An ``embed(sentences, role)`` serving every sentence the task asks for from one encoding per
    role, so that the task's evaluation and its search see the very same vectors."""
    store = {}
    for role, sentences in task.requests().items():
        unique = list(dict.fromkeys(sentences))
        store[role] = dict(zip(unique, np.asarray(encoder.encode_role(unique, role), dtype=np.float32)))

    def embed(sentences: list[str], role) -> np.ndarray:
        return np.stack([store[role][s] for s in sentences])

    return embed


def pytrec_per_query(task, scores: np.ndarray, ids: np.ndarray) -> dict[str, np.ndarray]:
    """pytrec_eval's nDCG@10, MAP@100, MRR@10 and recall@100 per scored query, on ``scores``/``ids``
    (``task.search``'s lists), in the task's query order."""
    import pytrec_eval

    def name(index: int) -> str:  # a larger id for an earlier document: trec_eval's tie order is corpus order
        return f"{10**9 - index:010d}"

    data = task.data
    qrels = {q: {name(d): s for d, s in rel.items()} for q, rel in zip(data.query_ids, data.relevant)}
    run = {
        q: {name(int(d)): float(s) for s, d in zip(row_s, row_i) if d >= 0}
        for q, row_s, row_i in zip(data.query_ids, scores, ids)
    }
    first10 = {
        q: {name(int(d)): float(s) for s, d in zip(row_s[:10], row_i[:10]) if d >= 0}
        for q, row_s, row_i in zip(data.query_ids, scores, ids)
    }
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map_cut.100", "recall.100"}).evaluate(run)
    top10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(first10)
    return {
        "ndcg@10": np.array([full[q]["ndcg_cut_10"] for q in data.query_ids]),
        "map@100": np.array([full[q]["map_cut_100"] for q in data.query_ids]),
        "mrr@10": np.array([top10[q]["recip_rank"] for q in data.query_ids]),
        "recall@100": np.array([full[q]["recall_100"] for q in data.query_ids]),
    }


def exact_ties(scores: np.ndarray) -> int:
    """Adjacent equal scores within the lists: where a tie rule decides the order."""
    finite = np.isfinite(scores[:, 1:]) & np.isfinite(scores[:, :-1])
    return int(((scores[:, 1:] == scores[:, :-1]) & finite).sum())
