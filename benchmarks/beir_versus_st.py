"""What a benchmark of retrieval through benchharness against a sentence-transformers information-
retrieval evaluator needs beside its model (``benchmarks/multi_vector_retrieval.py``): a BEIR folder
of real sentences at the size asked, the evaluator's inputs for it, each tool run in a fresh process
and the lines that compare them.

The folder is STS-B test as ``benchmarks/beir_stsb.py`` builds it (first sentences as queries,
second sentences as the corpus, gold >= 4 relevant), its corpus grown to the size asked with the
other distinct sentences of the shared data's tasks as distractors. The evaluator gets the task's own
reading of it (the same texts, scored queries and judgements) with corpus ids named in corpus order,
so that it breaks ties as benchharness does, and is asked for the task's metrics at the task's depth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: the metrics compared, named alike by the task and (after the similarity's prefix) the evaluator
METRICS = ("ndcg@10", "mrr@10", "map@100", "recall@100")
#: texts a batch, for both tools (sentence-transformers' evaluators' default)
BATCH_SIZE = 32


def write_folder(
    folder: Path, root: Any, corpus_size: int, distractors: Sequence[str], pairs: int | None = None
) -> dict:
    """The BEIR folder described above, from the data root ``root`` (``pairs``: STS-B test's first
    pairs only); its counts."""
    from beir_stsb import write_stsb_beir  # imported by scripts, whose folder is on the path

    from benchharness import tasks

    stsb = tasks.get("STSBenchmark")
    stsb.load(root)
    ((first, second, gold),) = stsb.subsets.values()
    counts = write_stsb_beir(folder, first[:pairs], second[:pairs], gold[:pairs])
    seen = {json.loads(line)["text"] for name in ("corpus", "queries") for line in (folder / f"{name}.jsonl").open()}
    room = corpus_size - counts["corpus"]
    added = 0
    with (folder / "corpus.jsonl").open("a") as fh:
        for name in distractors:
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


def evaluator_inputs(data: Any) -> dict[str, Any]:
    """The keyword arguments of an information-retrieval evaluator for a BEIR folder as the task reads
    it (``tasks.files.beir.BeirData``): ids in corpus order, the task's metrics at its cutoffs."""
    return {
        "queries": {f"q{i:07d}": text for i, text in enumerate(data.queries)},
        "corpus": {f"{i:07d}": text for i, text in enumerate(data.documents)},
        "relevant_docs": {f"q{i:07d}": {f"{j:07d}" for j in rel} for i, rel in enumerate(data.relevant)},
        "mrr_at_k": [10],
        "ndcg_at_k": [10],
        "map_at_k": [100],
        "precision_recall_at_k": [100],
        "accuracy_at_k": [1],
        "batch_size": BATCH_SIZE,
        "write_csv": False,
    }


def run_benchharness(model: Path, folder: Path, task: str, root: Path, device: str, memory: float) -> dict:
    """The task's metrics and facts through ``benchharness.evaluate("st:<model>", <the folder>)``."""
    import benchharness
    from benchharness.tasks.files.declarations import register_file_task

    register_file_task(task, folder, kind="retrieval")
    (result,) = benchharness.evaluate(
        f"st:{model}",
        task,
        data_dir=root,
        device=device,
        batch_size=BATCH_SIZE,
        intervals=False,
        embedding_memory_mib=memory,
    )
    return dict(result.metrics)


def measure(run: Callable[[], dict], device: str) -> None:
    """Run one tool in this (fresh) process and print its result line: wall time, peak memory, metrics."""
    import torch

    from benchharness.core.resources import peak_cuda_mib, peak_rss_mib
    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    t0 = time.perf_counter()
    metrics = run()
    if device.startswith("cuda"):  # the work done, not kernels still queued
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "peak_rss_mb": peak_rss_mib(), "peak_cuda_mb": peak_cuda_mib(torch.device(device))}
    print("RESULT " + json.dumps({**out, "metrics": metrics}))


def spawn(script: str, arguments: list[str]) -> dict:
    """``script`` run as a worker in a fresh process; the result line it printed."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([sys.executable, script, *arguments], capture_output=True, text=True, env=env, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"worker {arguments} failed:\n{out.stderr[-3000:]}")
    return json.loads(line[7:])


def metric_lines(ours: dict, theirs: dict, names: Sequence[str] = METRICS) -> tuple[list[str], float]:
    """A table of each metric on both sides and their difference, and the largest difference."""
    lines = [f"{'metric':18s} {'benchharness':>13s} {'sent-transf.':>13s} {'abs diff':>9s}"]
    worst = 0.0
    for name in names:
        diff = abs(ours[name] - theirs[name])
        worst = max(worst, diff)
        lines.append(f"{name:18s} {ours[name]:13.4f} {theirs[name]:13.4f} {diff:9.5f}")
    return lines, worst


def timing_lines(runs: dict[str, dict], repeats: int) -> list[str]:
    """Each tool's best wall time and peak memory (``runs``: label -> result, sentence-transformers'
    first), and the speed ratio."""
    lines = [f"wall time (model load + data + encode + search + metrics, best of {repeats}):"]
    for label, run in runs.items():
        cuda = f", peak CUDA {run['peak_cuda_mb']:.0f} MB" if run.get("peak_cuda_mb") is not None else ""
        lines.append(f"  {label:66s} {run['seconds']:8.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB{cuda}")
    st, bh = runs.values()
    lines.append(f"  speed ratio (sentence-transformers / benchharness): {st['seconds'] / bh['seconds']:.2f}x")
    return lines
