"""Reranking with a cross-encoder: benchharness beside sentence-transformers' own evaluator, on the
same samples with the same model, each in a fresh process (model load, data and scoring timed,
peak memory its own).

    python benchmarks/cross_encoder_reranking.py [--queries 1000] [--candidates 10] [--batch-size 64]
        [--device cpu]

The model: paraphrase-MiniLM-L3-v2's encoder with a seeded head (``tests.helpers.make_cross_encoder``),
saved as ``CrossEncoder.save`` saves it. The samples (``reranking_samples``, shared with
``tests/fidelity/test_cross_encoder_parity.py``): STS-B's pairs of every split (SentEval's text) whose
gold score is at least 4; each distinct first sentence is a query, its pair's second sentence a
positive, and every other query a second positive, the query's words in reverse order (so that MAP
and MRR differ); the rest of its ``--candidates`` are second sentences of other pairs, drawn with a
fixed seed.

- benchharness: the samples as a reranking file (``{"query", "positive", "negative"}`` lines),
  ``benchharness.evaluate("st:<folder>", <that task>)`` with its defaults (no cache, bootstrap
  intervals computed), MAP and MRR@10;
- sentence-transformers: ``CrossEncoderRerankingEvaluator(samples)`` (``negative`` lists, so every
  positive is reranked) on ``CrossEncoder(<folder>)``: MAP, MRR@10 and NDCG@10.

Both score every pair with ``CrossEncoder.predict`` (pairs sorted by length, longest first) at
``--batch-size``; the script prints each tool's wall time and peak memory, the ratio, and checks that
MAP and MRR@10 agree within 0.01 (x100). Each tool runs as ``benchmarks/versus_st.py`` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the STS-B pairs whose second sentence is a positive for their first
POSITIVE_FROM = 4.0
TASK = "cross-encoder-reranking"


def stsb_pairs(root: Path) -> tuple[list[str], list[str], list[float]]:
    """Every STS-B pair (train, dev and test) under the data root ``root``, as ``tasks.sts`` reads them."""
    from benchharness.data.readers import read_scored_tsv, stsb_file

    first: list[str] = []
    second: list[str] = []
    gold: list[float] = []
    for split in ("train", "dev", "test"):
        a, b, g = read_scored_tsv(root / stsb_file(split), (4, 5, 6), header=False)
        first, second, gold = first + a, second + b, gold + g
    return first, second, gold


def reranking_samples(
    first: list[str], second: list[str], gold: list[float], n_queries: int, n_candidates: int = 10, seed: int = 0
) -> list[dict[str, Any]]:
    """``n_queries`` reranking samples of ``n_candidates`` candidates each (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    queries: dict[str, str] = {}
    for a, b, g in zip(first, second, gold):
        if g >= POSITIVE_FROM and a not in queries:
            queries[a] = b
    pool = list(dict.fromkeys(second))
    samples = []
    for i, (query, positive) in enumerate(list(queries.items())[:n_queries]):
        positives = [positive] + ([" ".join(reversed(query.split()))] if i % 2 else [])
        negatives: list[str] = []
        while len(negatives) < n_candidates - len(positives):
            pick = pool[int(rng.integers(len(pool)))]
            if pick not in positives and pick not in negatives and pick != query:
                negatives.append(pick)
        samples.append({"query": query, "positive": positives, "negative": negatives})
    return samples


def write_samples(path: Path, samples: list[dict[str, Any]]) -> Path:
    """The samples as a reranking file (one JSON object a line)."""
    path.write_text("".join(json.dumps(sample) + "\n" for sample in samples), encoding="utf-8")
    return path


def worker_benchharness(model: Path, samples: Path, batch_size: int, device: str) -> dict[str, float]:
    import benchharness

    benchharness.register_file_task(TASK, samples, kind="reranking")
    [result] = benchharness.evaluate(f"st:{model}", TASK, batch_size=batch_size, device=device)
    return {"map": result.metrics["map"], "mrr@10": result.metrics["mrr@10"]}


def worker_sentence_transformers(model: Path, samples: Path, batch_size: int, device: str) -> dict[str, float]:
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator

    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    evaluator = CrossEncoderRerankingEvaluator(lines, at_k=10, batch_size=batch_size, write_csv=False)
    scores = evaluator(CrossEncoder(str(model), device=device, local_files_only=True))
    return {key: 100.0 * value for key, value in scores.items()}


#: each tool's worker, in the order they run: sentence-transformers' evaluator, then benchharness
WORKERS: dict[str, Callable[[Path, Path, int, str], dict[str, float]]] = {
    "sentence-transformers": worker_sentence_transformers,
    "benchharness": worker_benchharness,
}


def main() -> int:
    from machine import SMOKE, config, data_root, header, report
    from versus_st import measure, metric_lines, spawn, timing_lines

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="pairs per forward pass, both tools")
    parser.add_argument("--device", default="cpu", help="where both tools score (default cpu; cuda on a GPU)")
    parser.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=Path, help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(queries=12)
    args = parser.parse_args()
    if args.worker:
        run = WORKERS[args.worker]
        measure(lambda: run(args.model, args.samples, args.batch_size, args.device), args.device)
        return 0

    from benchharness.core.settings import apply_environment

    apply_environment(config())  # the offline hub cache, before the hub loads
    head = header()
    sys.path.insert(0, str(ROOT))  # the seeded cross-encoder comes from the tests' helpers
    from tests.helpers import make_cross_encoder

    with tempfile.TemporaryDirectory(prefix="cross-encoder-reranking-") as tmp:
        model = make_cross_encoder(Path(tmp) / "cross-encoder", seed=0)
        samples = reranking_samples(*stsb_pairs(data_root().root), args.queries, args.candidates)
        path = write_samples(Path(tmp) / "samples.jsonl", samples)
        common = ["--model", str(model), "--samples", str(path), "--batch-size", str(args.batch_size)]
        st, bh = (spawn(__file__, ["--worker", tool, *common, "--device", args.device]) for tool in WORKERS)
    pairs = sum(len(s["positive"]) + len(s["negative"]) for s in samples)
    compared, worst = metric_lines(bh["metrics"], st["metrics"], ("map", "mrr@10"))
    lines = [
        head,
        (
            f"{len(samples)} queries x {args.candidates} candidates ({pairs} pairs), seeded MiniLM-L3 "
            f"cross-encoder, batch size {args.batch_size}, device {args.device}, cpu threads {os.cpu_count()}"
        ),
        *compared,
        f"{'ndcg@10':20s} {'(not a metric)':>13s} {st['metrics']['ndcg@10']:13.4f}",
        *timing_lines(
            {"sentence-transformers CrossEncoderRerankingEvaluator:": st, "benchharness run:": bh},
            "model load + data + scoring + metrics",
        ),
        f"MAP and MRR@10 agree within 0.01 (x100 scale): {worst < 0.01} (largest difference {worst:.5f})",
    ]
    report("cross_encoder_reranking", lines)
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
