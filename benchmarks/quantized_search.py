"""Retrieval at reduced precision on two million documents: quality, index memory and search time
of each search setting, and the same searches through sentence-transformers' ``semantic_search_faiss``.

The corpus is ``large_corpus.py``'s synthetic one (every question2 a document, the duplicates'
question1s the queries), written as a BEIR folder and declared as one retrieval task per setting
(``search = "float32" | "int8" | "binary"``, ``rescore = 4``). ``benchharness.evaluate`` runs them
all for glove-50d in one call: the encoder encodes each sentence once, and each task builds its
index and searches. Reported per setting: MAP@100, nDCG@10 and MRR@10, the index's bytes, and the
task's evaluation time (embedding lookups, index build and search).

Then the search alone, on the same vectors, against what a user would otherwise run:
``semantic_search_faiss`` with its corpus precisions (float32, uint8, ubinary; rescoring x4 for the
quantized ones), top 100 for every query, and how many of its top-10 ids ours shares. Its faiss
search has no int8 corpus, only uint8, whose inner products rank differently (codes offset by 128):
the int8 rows time the nearest thing a user has, and their overlap is not a parity check (the
tests check int8 against ``quantize_embeddings``' own codes).

    python benchmarks/quantized_search.py [--rows 2000000] [--dup-every 400]

Writes ``results/benchmarks/quantized_search.txt``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from large_corpus import synthetic_pairs, vocabulary  # noqa: E402
from machine import SMOKE, config, data_root, header, report  # noqa: E402

#: (task suffix, search precision, rescore multiplier)
SETTINGS = [
    ("float32", "float32", None),
    ("int8", "int8", None),
    ("int8-rescore4", "int8", 4),
    ("binary", "binary", None),
    ("binary-rescore4", "binary", 4),
]
K = 100


def write_beir(folder: Path, rows: int, dup_every: int, words: list[str]) -> tuple[list[str], list[str]]:
    """The synthetic pairs as a BEIR folder; returns (documents, queries) in file order."""
    (folder / "qrels").mkdir(parents=True)
    documents, queries = [], []
    with (
        open(folder / "corpus.jsonl", "w", encoding="utf8") as corpus,
        open(folder / "queries.jsonl", "w", encoding="utf8") as query_file,
        open(folder / "qrels" / "test.tsv", "w", encoding="utf8") as qrels,
    ):
        qrels.write("query-id\tcorpus-id\tscore\n")
        for i, (q1, q2, dup) in enumerate(synthetic_pairs(rows, dup_every, words)):
            corpus.write(json.dumps({"_id": f"d{i}", "title": "", "text": q2}) + "\n")
            documents.append(q2)
            if dup:
                query_file.write(json.dumps({"_id": f"q{i}", "text": q1}) + "\n")
                qrels.write(f"q{i}\td{i}\t1\n")
                queries.append(q1)
    return documents, queries


def through_tasks(folder: Path, work: Path) -> list[str]:
    import benchharness

    names = []
    for suffix, precision, rescore in SETTINGS:
        name = f"synthetic-{suffix}"
        options = {"search": precision} | ({"rescore": rescore} if rescore else {})
        benchharness.register_file_task(name, folder, kind="retrieval", **options)
        names.append(name)
    t0 = time.perf_counter()
    results = benchharness.evaluate("glove-50d", names, data_dir=data_root().root, cache_dir=work / "cache")
    total = time.perf_counter() - t0
    lines = [f"through benchharness.evaluate (one call, {total:.1f} s, the encoding included):"]
    for name in names:
        r = results.get("glove-50d", name)
        m = r.metrics
        lines.append(
            f"  {name:26s} MAP@100 {m['map@100']:7.4f}  nDCG@10 {m['ndcg@10']:7.4f}  MRR@10 {m['mrr@10']:7.4f}  "
            f"index {m['index_bytes'] / 2**20:8.1f} MiB  evaluation {r.timings['evaluate_seconds']:6.1f} s"
        )
        print(lines[-1], flush=True)
    return lines


def search_alone(documents: list[str], queries: list[str]) -> list[str]:
    """Our search and sentence-transformers' on the same vectors: seconds and top-10 agreement."""
    from sentence_transformers.util.quantization import quantize_embeddings, semantic_search_faiss

    from benchharness.evaluation.resolver import Resolver
    from benchharness.scoring.quantization import normalise
    from benchharness.scoring.quantized_search import BLOCK, QuantizedCorpus

    encoder = Resolver().get("glove-50d")
    docs = normalise(encoder.encode(documents))
    q = normalise(encoder.encode(queries))
    lines = ["the search alone, on the same vectors (build + top 100 of every query; ST = semantic_search_faiss):"]
    ours_float = None
    for label, precision, rescore in SETTINGS:
        theirs = {"float32": "float32", "int8": "uint8", "binary": "ubinary"}[precision]
        t0 = time.perf_counter()
        corpus = QuantizedCorpus.build(lambda: (docs[i : i + BLOCK] for i in range(0, len(docs), BLOCK)), precision)
        _, ids = corpus.search(q, K, rescore=rescore)
        ours = time.perf_counter() - t0
        ours_float = ids if precision == "float32" else ours_float
        ranges = np.vstack([docs.min(axis=0), docs.max(axis=0)])
        t0 = time.perf_counter()
        codes = docs if theirs == "float32" else quantize_embeddings(docs, precision=theirs, ranges=ranges)
        hits, _ = semantic_search_faiss(
            q,
            codes,
            corpus_precision=theirs,
            top_k=K,
            ranges=ranges,
            rescore=rescore is not None,
            rescore_multiplier=rescore or 1,
        )
        st = time.perf_counter() - t0
        st_top = [[h["corpus_id"] for h in row[:10]] for row in hits]
        shared = np.mean([len(set(a[:10]) & set(b)) / 10 for a, b in zip(ids.tolist(), st_top)])
        recall = np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(ids.tolist(), ours_float.tolist())])
        lines.append(
            f"  {label:16s} ours {ours:6.1f} s   ST ({theirs}) {st:6.1f} s   ST/ours {st / ours:5.2f}x   "
            f"top-10 shared with ST {shared:.4f}   with our float32 {recall:.4f}"
        )
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dup-every", type=int, default=400)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(rows=3000, dup_every=50)
    args = parser.parse_args()
    from benchharness.core.settings import apply_environment

    apply_environment(config())
    lines = [header()]
    with tempfile.TemporaryDirectory(prefix="quantized-search-") as scratch:
        work = Path(scratch)
        documents, queries = write_beir(work / "beir", args.rows, args.dup_every, vocabulary(data_root().root))
        lines.append(f"{len(documents):,} documents, {len(queries):,} queries, glove-50d (50 dimensions)")
        lines += through_tasks(work / "beir", work)
        lines += search_alone(documents, queries)
    report("quantized_search", lines)


if __name__ == "__main__":
    main()
