"""Time sparse (SPLADE) retrieval over a corpus of 100,000 real sentences through benchharness and
through sentence-transformers' ``SparseInformationRetrievalEvaluator``, on the same model and data.

The model is the tests' seeded tiny SPLADE (``tests.sparse_helpers``: a 2-layer BERT of width 64
with the MiniLM vocabulary of 30,522 terms and an MLM head set to act lexically, about 40 active
terms a sentence), saved once to a temporary folder. The data is a BEIR folder: STS-B test as
``benchmarks/beir_stsb.py`` builds it (first sentences as queries, second sentences as the corpus,
gold >= 4 relevant), its corpus grown to ``--corpus`` documents with the other distinct sentences of
the shared data's tasks (``DISTRACTORS``, in order) as distractors. Each tool runs in its own fresh
process (model load, encoding and search inside the timing, no cache), so that its wall time and
peak memory (``ru_maxrss``) are its own:

- benchharness: ``benchharness.evaluate("st:<folder>", <the BEIR folder as a retrieval task>)``,
  the corpus encoded and searched a block of 65,536 documents at a time by sparse products, the
  scores of a block bounded by ``--memory`` MiB (``scoring.sparse``);
- sentence-transformers: the evaluator on the same queries, corpus and judgements (corpus ids named
  in corpus order, so both break ties alike), its default chunks of 50,000 documents.

Both encode 32 texts a batch on ``--device``. The script prints both times and peak memories, the
speed ratio, the sparsity figures both report, and checks that nDCG@10, MRR@10, MAP@100 and
recall@100 agree within 0.01 (x100).

    python benchmarks/sparse_retrieval.py [--corpus 100000] [--memory 1024] [--device cpu] [--repeats 1]

Writes ``results/benchmarks/sparse_retrieval.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the model comes from the tests' helpers

from beir_stsb import write_stsb_beir  # noqa: E402
from machine import SMOKE, data_root, header, report  # noqa: E402

TASK = "sparse-stsb"
#: the metrics compared, named alike by the task and (after the similarity's prefix) the evaluator
METRICS = ("ndcg@10", "mrr@10", "map@100", "recall@100")
#: the sparsity figures both report, under sentence-transformers' names
FIGURES = ("query_active_dims", "corpus_active_dims", "avg_flops")
#: the tasks whose sentences are the distractors, in order (about 137,000 distinct sentences)
DISTRACTORS = (
    "STS12",
    "STS13",
    "STS14",
    "STS15",
    "STS16",
    "SICKRelatedness",
    "MR",
    "CR",
    "SUBJ",
    "MPQA",
    "TREC",
    "MRPC",
    "SST2",
)
BATCH_SIZE = 32


def write_folder(folder: Path, corpus_size: int, pairs: int | None = None) -> dict[str, int]:
    """The BEIR folder described above (``pairs``: STS-B test's first pairs only); its counts."""
    from benchharness import tasks

    root = data_root()
    stsb = tasks.get("STSBenchmark")
    stsb.load(root)
    ((first, second, gold),) = stsb.subsets.values()
    counts = write_stsb_beir(folder, first[:pairs], second[:pairs], gold[:pairs])
    seen = {json.loads(line)["text"] for name in ("corpus", "queries") for line in (folder / f"{name}.jsonl").open()}
    room = corpus_size - counts["corpus"]
    added = 0
    with (folder / "corpus.jsonl").open("a") as fh:
        for name in DISTRACTORS:
            if added >= room:
                break
            task = tasks.get(name)
            task.load(root)
            for sentence in dict.fromkeys(s.strip() for s in task.sentences()):
                if added >= room:
                    break
                if sentence and sentence not in seen:
                    seen.add(sentence)
                    fh.write(json.dumps({"_id": f"x{added}", "title": "", "text": sentence}) + "\n")
                    added += 1
    return {**counts, "corpus": counts["corpus"] + added, "distractors": added}


def worker_benchharness(model: Path, folder: Path, device: str, memory: float) -> dict:
    import benchharness
    from benchharness.tasks.files.declarations import register_file_task

    register_file_task(TASK, folder, kind="retrieval")
    (result,) = benchharness.evaluate(
        f"st:{model}",
        TASK,
        data_dir=data_root().root,
        device=device,
        batch_size=BATCH_SIZE,
        intervals=False,
        embedding_memory_mib=memory,
    )
    return dict(result.metrics)


def worker_sentence_transformers(model: Path, folder: Path, device: str) -> dict:
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.evaluation import SparseInformationRetrievalEvaluator

    from benchharness.tasks.files.beir import read_beir

    data = read_beir(folder, "test")  # the task's own reading: the same texts, scored queries and judgements
    evaluator = SparseInformationRetrievalEvaluator(
        queries={f"q{i:07d}": text for i, text in enumerate(data.queries)},
        corpus={f"{i:07d}": text for i, text in enumerate(data.documents)},
        relevant_docs={f"q{i:07d}": {f"{j:07d}" for j in rel} for i, rel in enumerate(data.relevant)},
        mrr_at_k=[10],
        ndcg_at_k=[10],
        map_at_k=[100],
        precision_recall_at_k=[100],
        accuracy_at_k=[1],
        batch_size=BATCH_SIZE,
        write_csv=False,
    )
    scores = evaluator(SparseEncoder(str(model), local_files_only=True, device=device))
    return {
        **{metric: 100.0 * scores[f"dot_{metric}"] for metric in METRICS},
        **{figure: float(scores[figure]) for figure in FIGURES},
    }


def _worker(tool: str, model: Path, folder: Path, device: str, memory: float) -> None:
    import torch

    from benchharness.core.resources import peak_cuda_mib, peak_rss_mib
    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    t0 = time.perf_counter()
    if tool == "benchharness":
        metrics = worker_benchharness(model, folder, device, memory)
    else:
        metrics = worker_sentence_transformers(model, folder, device)
    if device.startswith("cuda"):  # the work done, not kernels still queued
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "peak_rss_mb": peak_rss_mib(), "peak_cuda_mb": peak_cuda_mib(torch.device(device))}
    print("RESULT " + json.dumps({**out, "metrics": metrics}))


def _spawn(tool: str, model: Path, folder: Path, device: str, memory: float) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, __file__, "--worker", tool, "--model", str(model), "--folder", str(folder)]
    out = subprocess.run(
        [*command, "--device", device, "--memory", str(memory)], capture_output=True, text=True, env=env, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{tool} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(line[7:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=int, default=100_000, help="documents in the corpus (STS-B's and distractors)")
    parser.add_argument("--memory", type=float, default=1024.0, help="benchharness's memory bound (MiB)")
    parser.add_argument("--device", default="cpu", help="where both tools encode and score (default cpu)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs per tool; the best is kept")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(corpus=300)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.model, args.folder, args.device, args.memory)
        return 0
    from benchharness.core.settings import apply_environment, load_config
    from tests.sparse_helpers import make_tiny_splade

    apply_environment(load_config())  # this script owns its process: the offline hub cache the model's vocabulary is in
    with tempfile.TemporaryDirectory(prefix="sparse-retrieval-") as scratch:
        model = make_tiny_splade(Path(scratch) / "splade")
        folder = Path(scratch) / "beir"
        counts = write_folder(folder, args.corpus, pairs=100 if SMOKE else None)
        runs: dict[str, list[dict]] = {"sentence-transformers": [], "benchharness": []}
        for _ in range(args.repeats):
            runs["sentence-transformers"].append(_spawn("st", model, folder, args.device, args.memory))
            runs["benchharness"].append(_spawn("benchharness", model, folder, args.device, args.memory))
    best = {tool: min(r, key=lambda x: x["seconds"]) for tool, r in runs.items()}
    bh, st = best["benchharness"], best["sentence-transformers"]
    lines = [
        header(),
        (
            "model: tiny seeded SPLADE (SparseEncoder: 2-layer BERT, width 64, MiniLM vocabulary of 30,522 terms, "
            f"MLM head + SpladePooling max), device {args.device}, cpu threads: {os.cpu_count()}"
        ),
        (
            f"data: STS-B test as BEIR ({counts['judged_queries']} scored queries) + {counts['distractors']:,} "
            f"distractor sentences of {', '.join(DISTRACTORS)}: {counts['corpus']:,} documents"
        ),
        f"{'metric':20s} {'benchharness':>13s} {'sent-transf.':>13s} {'abs diff':>9s}",
    ]
    worst = 0.0
    for metric in (*METRICS, *FIGURES):
        diff = abs(bh["metrics"][metric] - st["metrics"][metric])
        worst = max(worst, diff) if metric in METRICS else worst
        lines.append(f"{metric:20s} {bh['metrics'][metric]:13.4f} {st['metrics'][metric]:13.4f} {diff:9.5f}")
    m = bh["metrics"]
    lines += [
        (
            f"corpus as CSR (benchharness's facts): {m['bytes_per_document']:,.0f} bytes per document, "
            f"{m['index_bytes'] / 2**20:,.1f} MiB in all"
        ),
        f"wall time (model load + data + encode + search + metrics, best of {args.repeats}):",
    ]
    for label, run in (
        ("sentence-transformers SparseInformationRetrievalEvaluator:", st),
        (f"benchharness evaluate (memory bound {args.memory:g} MiB):", bh),
    ):
        cuda = f", peak CUDA {run['peak_cuda_mb']:.0f} MB" if run.get("peak_cuda_mb") is not None else ""
        lines.append(f"  {label:62s} {run['seconds']:8.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB{cuda}")
    lines.append(f"  speed ratio (sentence-transformers / benchharness): {st['seconds'] / bh['seconds']:.2f}x")
    same = worst < 0.01
    lines.append(f"metrics agree within 0.01 (x100 scale): {same} (largest difference {worst:.5f})")
    report("sparse_retrieval", lines)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
