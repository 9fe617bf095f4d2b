"""What one ``benchharness.STSEvaluator`` call costs over the work it must do.

In one process, on one loaded ``SentenceTransformer`` (paraphrase-MiniLM-L3-v2 by default), this
alternates two things ``--repeats`` times and prints the median of each and their ratio:

- the evaluator's call on STS-B dev (SICK's trial split in smoke mode), as a sentence-transformers
  trainer makes it every ``eval_steps`` (a fresh fingerprint of the weights, the protocol, no intervals);
- the bare work through the harness's own engine: ``benchharness.as_encoder(model).encode`` of the
  same unique sentences, a cosine per pair and ``scipy.stats.spearmanr`` against the gold scores
  (the ratio of the call to this is the evaluator's overhead: fingerprint, task, result record);
- the same with ``SentenceTransformer.encode``, what a user would otherwise write.

The first call of each is a warm-up and is not counted. Run it with each checkout's interpreter to
compare old and new code on one idle machine (the script uses only the public API):

    python benchmarks/evaluator_call.py [--repeats 7] [--model sentence-transformers/paraphrase-MiniLM-L3-v2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from machine import SMOKE, data_root, header


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--model", default="sentence-transformers/paraphrase-MiniLM-L3-v2")
    args = parser.parse_args()
    repeats = 1 if SMOKE else args.repeats
    task_name = "SICKRelatedness-trial" if SMOKE else "STSBenchmark-dev"  # smoke: a third of the sentences

    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())  # this script owns its process: the offline hub cache, before the hub loads
    from huggingface_hub import snapshot_download
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    import benchharness
    from benchharness import tasks

    task = tasks.get(task_name)  # (not benchharness.get_task: the script also times older checkouts)

    task.load(data_root())
    ((first, second, gold),) = task.subsets.values()
    gold = np.asarray(gold, dtype=np.float64)
    sentences = list(dict.fromkeys([*first, *second]))
    row = {s: i for i, s in enumerate(sentences)}
    model = SentenceTransformer(snapshot_download(args.model, local_files_only=True), device="cpu")
    evaluator = benchharness.STSEvaluator(task_name)

    def spearman(vectors: np.ndarray) -> float:
        a = vectors[[row[s] for s in first]]
        b = vectors[[row[s] for s in second]]
        cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        return 100 * spearmanr(cosine, gold)[0]

    def engine() -> float:
        return spearman(benchharness.as_encoder(model).encode(sentences))

    def st_encode() -> float:
        return spearman(model.encode(sentences, batch_size=64, convert_to_numpy=True))

    def harness() -> float:
        return 100 * evaluator(model)[f"benchharness_{task_name}_main"]

    print(header())
    print(f"{len(sentences)} unique sentences, {len(gold)} pairs; benchharness at {os.getcwd()}")
    steps = {"engine": engine, "evaluator": harness, "st-encode": st_encode}
    times: dict[str, list[float]] = {name: [] for name in steps}
    scores = {}
    for i in range(repeats + (0 if SMOKE else 1)):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            scores[name] = fn()
            if i or SMOKE:
                times[name].append(time.perf_counter() - t0)
    median = {name: statistics.median(t) for name, t in times.items()}
    labels = {
        "engine": "as_encoder(model).encode + spearman",
        "evaluator": "STSEvaluator call",
        "st-encode": "SentenceTransformer.encode + spearman",
    }
    for name in steps:
        print(
            f"{labels[name]:38s} median {median[name]:7.3f} s  ({task_name} {scores[name]:.2f})  "
            f"{median[name] / median['engine']:.3f}x the engine's bare work"
        )


if __name__ == "__main__":
    main()
