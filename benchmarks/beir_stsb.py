"""STS-B test as a BEIR retrieval task from files: benchharness's metrics beside pytrec_eval's.

Builds the BEIR folder below from the STS-B test pairs of ``tasks/sts.py``
(SentEval's tokenized, lowercased text) in a temporary folder, declares it as a ``retrieval`` file
task, and for each encoder prints:

- the task's metrics through ``benchharness.evaluate`` (nDCG@10 with its bootstrap interval,
  MAP@100, MRR@10, recall@100);
- pytrec_eval's, on the task's own rankings (the same cosines: one encoding per role serves both
  the task's evaluation and its search), and the largest per-query difference between the two;
- how many adjacent scores in the top-100 lists are exactly equal (where a tie rule decides).

    python benchmarks/beir_stsb.py [--encoders minilm-l6,minilm-l3,glove-50d]

The helpers here are shared with ``benchmarks/openai_server.py`` and
``tests/fidelity/test_beir_pytrec.py``.

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

import argparse
import json
import tempfile
import time
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


TASK = "beir-stsb"
KEYS = ("ndcg@10", "map@100", "mrr@10", "recall@100")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoders", default="minilm-l6,minilm-l3,glove-50d")
    args = parser.parse_args()
    from machine import SMOKE, data_root, header, report  # the benchmarks' folder is on the path of a script only

    encoders = ["glove-50d"] if SMOKE else args.encoders.split(",")

    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())  # this script owns its process: the offline hub cache, before the hub loads
    import benchharness
    from benchharness import tasks
    from benchharness.evaluation.resolver import Resolver
    from benchharness.scoring.top_k import exact_ties
    from benchharness.tasks.files.declarations import register_file_task

    stsb = tasks.get("STSBenchmark")
    stsb.load(data_root())
    ((first, second, gold),) = stsb.subsets.values()
    if SMOKE:
        first, second, gold = first[:80], second[:80], gold[:80]
    lines = [header()]
    with tempfile.TemporaryDirectory(prefix="beir-stsb-") as tmp:
        counts = write_stsb_beir(Path(tmp) / "stsb", first, second, np.asarray(gold))
        register_file_task(TASK, Path(tmp) / "stsb", kind="retrieval")
        lines.append(
            f"# STS-B test as BEIR: {counts['pairs']} pairs -> {counts['queries']} distinct first sentences "
            f"(queries), {counts['corpus']} distinct second sentences (corpus), {counts['relevant_pairs']} "
            f"relevant pairs (gold >= 4, relevance 1) judging {counts['judged_queries']} queries (scored)"
        )
        lines.append(
            "# x100; pytrec_eval on the task's own top-100 lists (same cosines); max|diff| over per-query "
            "values; ties = adjacent exactly equal scores in the top-100 lists"
        )
        lines.append(
            f"{'encoder':<11} {'nDCG@10 [95% CI]':<22} {'MAP@100':>8} {'MRR@10':>8} {'R@100':>8} | "
            f"{'pytrec: nDCG@10':>15} {'MAP@100':>8} {'MRR@10':>8} {'R@100':>8} | {'max|diff|':>9} "
            f"{'ties':>5} {'seconds':>8}"
        )
        for name in encoders:
            t0 = time.perf_counter()
            [result] = benchharness.evaluate(name, TASK)
            task = tasks.get(TASK)
            task.load(data_root())
            embed = encoded_once(Resolver().get(name), task)
            ours = task.evaluate_items(embed, 0).items
            scores, ids, _ = task.search(embed)
            theirs = pytrec_per_query(task, scores, ids)
            diff = max(float(np.abs(ours[k] - theirs[k]).max()) for k in KEYS)
            low, high = result.confidence["main"]
            m = result.metrics
            lines.append(
                f"{name:<11} {m['ndcg@10']:6.2f} [{low:5.2f}, {high:5.2f}]{'':<5} {m['map@100']:8.2f} "
                f"{m['mrr@10']:8.2f} {m['recall@100']:8.2f} | {100 * theirs['ndcg@10'].mean():15.2f} "
                f"{100 * theirs['map@100'].mean():8.2f} {100 * theirs['mrr@10'].mean():8.2f} "
                f"{100 * theirs['recall@100'].mean():8.2f} | {diff:9.1e} {exact_ties(scores):5d} "
                f"{time.perf_counter() - t0:8.1f}"
            )
            # the evaluate() path and the once-encoded path score alike (same encoder, same task)
            lines.append(
                f"{'':<11} (evaluate nDCG@10 {m['ndcg@10']:.6f}; once-encoded {100 * ours['ndcg@10'].mean():.6f})"
            )
    report("beir_stsb", lines)


if __name__ == "__main__":
    main()
