"""Time MaxSim retrieval over a corpus of real sentences through benchharness and through
sentence-transformers' ``MultiVectorInformationRetrievalEvaluator``, on the same model and data.

The model is the tests' seeded ColBERT-style ``MultiVectorEncoder`` on MiniLM-L3
(``tests.multi_vector_helpers``: "[Q] "/"[D] " prompts, queries expanded to 32 tokens, 128
dimensions), saved once to a temporary folder. The data is a BEIR folder: STS-B test as
``benchmarks/beir_stsb.py`` builds it (first sentences as queries, second sentences as the corpus,
gold >= 4 relevant), its corpus grown to ``--corpus`` documents with the other distinct sentences of
STS12-16 and SICK-R as distractors. Each tool runs in its own fresh process (model load, encoding
and search inside the timing, no embedding cache), so that its wall time and peak memory are its
own:

- benchharness: ``benchharness.evaluate("st:<folder>", <the BEIR folder as a retrieval task>)``,
  the corpus encoded and searched a block at a time within ``--memory`` MiB (``scoring.maxsim``);
- sentence-transformers: the evaluator on the same queries, corpus and judgements (corpus ids
  named in corpus order, so both break ties alike), its default chunks of 5,000 documents.

Both encode 32 texts a batch on ``--device``. The script prints both times and peak memories, the
speed ratio, the bytes per document benchharness reports, and checks that nDCG@10, MRR@10, MAP@100
and recall@100 agree within 0.01 (x100).

    python benchmarks/multi_vector_retrieval.py [--corpus 20000] [--memory 1024] [--device cpu] [--repeats 1]

Writes ``results/benchmarks/multi_vector_retrieval.txt``.
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

TASK = "multi-vector-stsb"
#: the metrics compared, named alike by the task and (after the similarity's prefix) the evaluator
METRICS = ("ndcg@10", "mrr@10", "map@100", "recall@100")
#: where the distractors come from, in order
DISTRACTORS = ("STS12", "STS13", "STS14", "STS15", "STS16", "SICKRelatedness")
BATCH_SIZE = 32


def write_folder(folder: Path, corpus_size: int, pairs: int | None = None) -> dict[str, int]:
    """The BEIR folder described above (``pairs``: STS-B test's first pairs only); its counts."""
    from benchharness import tasks

    root = data_root()
    stsb = tasks.get("STSBenchmark")
    stsb.load(root)
    ((first, second, gold),) = stsb.subsets.values()
    counts = write_stsb_beir(folder, first[:pairs], second[:pairs], gold[:pairs])
    documents = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    seen = {d["text"] for d in documents} | {json.loads(q)["text"] for q in (folder / "queries.jsonl").open()}
    extra: list[str] = []
    for name in DISTRACTORS:
        task = tasks.get(name)
        task.load(root)
        for a, b, _ in task.subsets.values():
            for sentence in [*a, *b]:
                if len(documents) + len(extra) >= corpus_size:
                    break
                if sentence not in seen:
                    seen.add(sentence)
                    extra.append(sentence)
    with (folder / "corpus.jsonl").open("a") as fh:
        for i, text in enumerate(extra):
            fh.write(json.dumps({"_id": f"x{i}", "title": "", "text": text}) + "\n")
    return {**counts, "corpus": len(documents) + len(extra), "distractors": len(extra)}


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
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.multi_vector_encoder.evaluation import MultiVectorInformationRetrievalEvaluator

    from benchharness.tasks.files.beir import read_beir

    data = read_beir(folder, "test")  # the task's own reading: the same texts, scored queries and judgements
    evaluator = MultiVectorInformationRetrievalEvaluator(
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
    scores = evaluator(MultiVectorEncoder(str(model), local_files_only=True, device=device))
    return {metric: 100.0 * scores[f"maxsim_{metric}"] for metric in METRICS}


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
    parser.add_argument("--corpus", type=int, default=20_000, help="documents in the corpus (STS-B's and distractors)")
    parser.add_argument("--memory", type=float, default=1024.0, help="benchharness's memory bound (MiB)")
    parser.add_argument("--device", default="cpu", help="where both tools encode and score (default cpu)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs per tool; the best is kept")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(corpus=120)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.model, args.folder, args.device, args.memory)
        return 0
    from tests.helpers import MINILM_L3
    from tests.multi_vector_helpers import make_colbert

    with tempfile.TemporaryDirectory(prefix="multi-vector-retrieval-") as scratch:
        model = make_colbert(Path(scratch) / "colbert", MINILM_L3)
        folder = Path(scratch) / "beir"
        counts = write_folder(folder, args.corpus, pairs=100 if SMOKE else None)
        runs: dict[str, list[dict]] = {"sentence-transformers": [], "benchharness": []}
        for _ in range(args.repeats):
            runs["sentence-transformers"].append(_spawn("st", model, folder, args.device, args.memory))
            runs["benchharness"].append(_spawn("benchharness", model, folder, args.device, args.memory))
    best = {tool: min(r, key=lambda x: x["seconds"]) for tool, r in runs.items()}
    bh, st = best["benchharness"], best["sentence-transformers"]
    model_line = (
        "model: ColBERT-style MultiVectorEncoder on MiniLM-L3 (seeded 128-d projection, queries expanded to 32 "
        f"tokens), device {args.device}, cpu threads: {os.cpu_count()}"
    )
    data_line = (
        f"data: STS-B test as BEIR ({counts['judged_queries']} scored queries) + {counts['distractors']:,} "
        f"distractor sentences of {', '.join(DISTRACTORS)}: {counts['corpus']:,} documents"
    )
    columns = f"{'metric':12s} {'benchharness':>13s} {'sent-transf.':>13s} {'abs diff':>9s}"
    lines = [header(), model_line, data_line, columns]
    worst = 0.0
    for metric in METRICS:
        diff = abs(bh["metrics"][metric] - st["metrics"][metric])
        worst = max(worst, diff)
        lines.append(f"{metric:12s} {bh['metrics'][metric]:13.4f} {st['metrics'][metric]:13.4f} {diff:9.5f}")
    m = bh["metrics"]
    lines.append(
        f"token vectors (float32, benchharness's facts): {m['bytes_per_document']:,.0f} bytes per document "
        f"({m['tokens_per_document']:.1f} tokens x {m['token_dimension']} x 4), {m['index_bytes'] / 2**20:,.1f} MiB "
        f"for the corpus; {m['tokens_per_query']:.0f} tokens per query"
    )
    lines.append(f"wall time (model load + data + encode + search + metrics, best of {args.repeats}):")
    for label, run in (
        ("sentence-transformers MultiVectorInformationRetrievalEvaluator:", st),
        (f"benchharness evaluate (memory bound {args.memory:g} MiB):", bh),
    ):
        cuda = f", peak CUDA {run['peak_cuda_mb']:.0f} MB" if run.get("peak_cuda_mb") is not None else ""
        lines.append(f"  {label:66s} {run['seconds']:8.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB{cuda}")
    lines.append(f"  speed ratio (sentence-transformers / benchharness): {st['seconds'] / bh['seconds']:.2f}x")
    same = worst < 0.01
    lines.append(f"metrics agree within 0.01 (x100 scale): {same} (largest difference {worst:.5f})")
    report("multi_vector_retrieval", lines)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
