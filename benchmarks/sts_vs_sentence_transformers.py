"""Time the STS suite for one model through benchharness and through sentence-transformers.

The alternative a user would otherwise write is one ``EmbeddingSimilarityEvaluator`` per task
(STS12-16 with their subsets concatenated, which is the 'all' aggregation, STS-B test, SICK-R
test) fed the very same sentence pairs. Each tool runs in its own fresh subprocess (cold: no
embedding cache, model loaded inside the timing) so that wall time and peak memory are its own.
The script checks that both give the same seven Spearman scores and prints the speed ratio.

benchharness runs its default, the inference engine (tokenized once, batches of equal token
length); ``--backend reference`` (or compile, onnx) times the built-in definition with that backend, e.g.
``SentenceTransformer.encode`` over the de-duplicated sentences.

    python benchmarks/sts_vs_sentence_transformers.py [--model minilm-l6] [--backend reference] [--repeats 1]
        [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from machine import SMOKE, data_root

from benchharness.core.resources import peak_rss_mib
from benchharness.encoders.builtins import MINILMS as HUB_IDS

#: the STS suite (smoke mode: SICK-R's 500 trial pairs)
STS = (
    ["SICKRelatedness-trial"]
    if SMOKE
    else ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
)


def worker_benchharness(model: str, backend: str | None, device: str) -> dict[str, float]:
    import benchharness
    from benchharness.encoders.builtins import BUILTINS
    from benchharness.evaluation.resolver import Resolver, build

    chosen: object = model
    if backend:  # the built-in definition with another backend, built as the resolver builds it
        chosen = build(model, {**BUILTINS[model].spec, "backend": backend}, Resolver().context)
    # no embedding cache and nothing stored: every sentence is encoded
    return {r.task: r.main_score for r in benchharness.evaluate(chosen, STS, device=device)}


def worker_sentence_transformers(model: str, device: str) -> dict[str, float]:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    except ImportError:
        from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

    from benchharness import tasks

    st = SentenceTransformer(HUB_IDS[model], device=device)
    scores = {}
    for name in STS:
        task = tasks.get(name)
        task.load(data_root())
        s1 = [s for a, _, _ in task.subsets.values() for s in a]
        s2 = [s for _, b, _ in task.subsets.values() for s in b]
        gold = np.concatenate([g for _, _, g in task.subsets.values()]).tolist()
        evaluator = EmbeddingSimilarityEvaluator(s1, s2, gold, batch_size=64, name=name, similarity_fn_names=["cosine"])
        out = evaluator(st)
        key = next(k for k in out if k.endswith("spearman_cosine"))
        scores[name] = 100.0 * out[key]
    return scores


def _worker(tool: str, model: str, backend: str | None, device: str) -> None:
    import torch

    from benchharness.core.resources import peak_cuda_mib
    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    t0 = time.perf_counter()
    if tool == "benchharness":
        scores = worker_benchharness(model, backend, device)
    else:
        scores = worker_sentence_transformers(model, device)
    if device.startswith("cuda"):  # the work done, not kernels still queued
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    cuda = peak_cuda_mib(torch.device(device))
    print(
        "RESULT "
        + json.dumps({"seconds": seconds, "peak_rss_mb": peak_rss_mib(), "peak_cuda_mb": cuda, "scores": scores})
    )


def _spawn(tool: str, model: str, backend: str | None, device: str) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    extra = ["--backend", backend] if backend else []
    out = subprocess.run(
        [sys.executable, __file__, "--worker", tool, "--model", model, "--device", device, *extra],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{tool} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(line[7:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6", choices=sorted(HUB_IDS))
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs per tool; the best is kept")
    parser.add_argument(
        "--backend",
        choices=["reference", "eager", "compile", "onnx"],
        help="encoding backend of benchharness (default: its default, the engine with eager PyTorch)",
    )
    parser.add_argument("--device", default="cpu", help="where both tools encode (default cpu; cuda on a GPU)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(model="minilm-l3")
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.model, args.backend, args.device)
        return 0
    runs: dict[str, list[dict]] = {"sentence-transformers": [], "benchharness": []}
    for _ in range(args.repeats):
        runs["sentence-transformers"].append(_spawn("st", args.model, None, args.device))
        runs["benchharness"].append(_spawn("benchharness", args.model, args.backend, args.device))
    best = {tool: min(r, key=lambda x: x["seconds"]) for tool, r in runs.items()}
    bh, st = best["benchharness"], best["sentence-transformers"]
    path = f"backend={args.backend or 'default (eager)'}"
    print(
        f"model: {args.model} ({HUB_IDS[args.model]}), benchharness {path}, device {args.device}, "
        f"cpu threads: {os.cpu_count()}"
    )
    print(f"{'task':18s} {'benchharness':>13s} {'sent-transf.':>13s} {'abs diff':>9s}")
    worst = 0.0
    for name in STS:
        diff = abs(bh["scores"][name] - st["scores"][name])
        worst = max(worst, diff)
        print(f"{name:18s} {bh['scores'][name]:13.4f} {st['scores'][name]:13.4f} {diff:9.5f}")
    print(f"\nwall time (model load + data + encode + evaluate, best of {args.repeats}):")
    for label, run in (("sentence-transformers EmbeddingSimilarityEvaluator x7:", st), ("benchharness run:", bh)):
        cuda = f", peak CUDA {run['peak_cuda_mb']:.0f} MB" if run.get("peak_cuda_mb") is not None else ""
        print(f"  {label:54s} {run['seconds']:8.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB{cuda}")
    print(f"  speed-up: {st['seconds'] / bh['seconds']:.2f}x")
    same = worst < 0.01
    print(f"scores agree within 0.01 (x100 scale): {same} (largest difference {worst:.5f})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
