"""Time the STS suite for one model through benchharness and through sentence-transformers.

The alternative a user would otherwise write is one ``EmbeddingSimilarityEvaluator`` per task
(STS12-16 with their subsets concatenated, which is the 'all' aggregation, STS-B test, SICK-R
test) fed the very same sentence pairs. Each tool runs in its own fresh subprocess (cold: no
embedding cache, model loaded inside the timing) so that wall time and peak memory are its own.
The script checks that both give the same seven Spearman scores and prints the speed ratio
(``benchmarks/versus_st.py`` runs both tools).

benchharness runs its default, the inference engine (tokenized once, batches of equal token
length); ``--backend reference`` (or compile, onnx) times the built-in definition with that backend, e.g.
``SentenceTransformer.encode`` over the de-duplicated sentences.

    python benchmarks/sts_vs_sentence_transformers.py [--model minilm-l6] [--backend reference] [--repeats 1]
        [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import sys

from machine import SMOKE, data_root
from versus_st import measure, metric_lines, spawn, timing_lines

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
    if args.worker == "benchharness":
        measure(lambda: worker_benchharness(args.model, args.backend, args.device), args.device)
        return 0
    if args.worker:
        measure(lambda: worker_sentence_transformers(args.model, args.device), args.device)
        return 0
    st_worker = ["--worker", "st", "--model", args.model, "--device", args.device]
    bh_worker = ["--worker", "benchharness", "--model", args.model, "--device", args.device]
    bh_worker += ["--backend", args.backend] if args.backend else []
    runs: dict[str, list[dict]] = {"sentence-transformers": [], "benchharness": []}
    for _ in range(args.repeats):
        runs["sentence-transformers"].append(spawn(__file__, st_worker))
        runs["benchharness"].append(spawn(__file__, bh_worker))
    st, bh = (min(runs[tool], key=lambda x: x["seconds"]) for tool in ("sentence-transformers", "benchharness"))
    path = f"backend={args.backend or 'default (eager)'}"
    compared, worst = metric_lines(bh["metrics"], st["metrics"], STS, column="task")
    timings = {"sentence-transformers EmbeddingSimilarityEvaluator x7:": st, "benchharness run:": bh}
    lines = [
        (
            f"model: {args.model} ({HUB_IDS[args.model]}), benchharness {path}, device {args.device}, "
            f"cpu threads: {os.cpu_count()}"
        ),
        *compared,
        "",
        *timing_lines(timings, "model load + data + encode + evaluate", args.repeats),
        f"scores agree within 0.01 (x100 scale): {worst < 0.01} (largest difference {worst:.5f})",
    ]
    print("\n".join(lines))
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
