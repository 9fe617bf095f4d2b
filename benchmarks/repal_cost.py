"""What RepAL costs on top of its base encoder.

RepAL encodes every sentence twice (x and its keyword-masked x*) and masks with TF-IDF first, so
its per-sentence cost should be about twice the base encoder's. This times both on the same STS-B
test sentences, uncached, alternating the two to spread machine noise evenly, and reports medians
of wall time and of process CPU time (on a shared machine the CPU time, with one thread, is the
steadier measure of the work done).
The fit (v_mean over a corpus) is a one-off cost per encoder; it is timed separately on a small
corpus here (its cost is linear in the corpus size, at the base encoder's speed).

    python benchmarks/repal_cost.py --encoder minilm-l6 --n 512 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from machine import SMOKE, data_root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="minilm-l6")
    parser.add_argument("--n", type=int, default=512, help="STS-B test sentences to encode")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fit-sentences", type=int, default=256, help="STS-B train sentences for v_mean")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: fair on a shared machine)")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(encoder="minilm-l3", n=32, repeats=1, fit_sentences=32)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    from benchharness import tasks
    from benchharness.data.corpora import load_corpus
    from benchharness.evaluation.resolver import Resolver
    from benchharness.evaluation.run_settings import RunSettings

    data = data_root()
    task = tasks.get("STSBenchmark")
    task.load(data)
    sentences = list(dict.fromkeys(task.sentences()))[: args.n]
    fit_file = Path(tempfile.mkdtemp()) / "fit.txt"
    fit_file.write_text("\n".join(load_corpus("stsb-train", data, unique=True)[: args.fit_sentences]) + "\n")

    registry = Resolver(settings=RunSettings(data_dir=data.root))  # no embedding cache: every encode is real work
    base = registry.get(args.encoder)
    repal = registry.get(f"{args.encoder}+repal(fit=text:{fit_file})")
    base.encode(sentences[:8])  # load weights outside the timings
    t0 = time.perf_counter()
    repal.fit()
    fit_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    repal.masked(sentences)
    mask_seconds = time.perf_counter() - t0

    timings: dict[str, list[float]] = {"base": [], "repal": []}
    cpu: dict[str, list[float]] = {"base": [], "repal": []}
    for _ in range(args.repeats):
        for label, encoder in (("base", base), ("repal", repal)):
            t0, c0 = time.perf_counter(), time.process_time()
            encoder.encode(sentences)
            timings[label].append(round(time.perf_counter() - t0, 3))
            cpu[label].append(round(time.process_time() - c0, 3))
    base_s, repal_s = statistics.median(timings["base"]), statistics.median(timings["repal"])
    base_cpu, repal_cpu = statistics.median(cpu["base"]), statistics.median(cpu["repal"])
    print(
        json.dumps(
            {
                "encoder": args.encoder,
                "sentences": len(sentences),
                "threads": args.threads,
                "device": str(getattr(base, "device", "cpu")),
                "repeats": args.repeats,
                "base_seconds": timings["base"],
                "repal_seconds": timings["repal"],
                "base_sentences_per_s": round(len(sentences) / base_s, 1),
                "repal_sentences_per_s": round(len(sentences) / repal_s, 1),
                "ratio_repal_over_base": round(repal_s / base_s, 3),
                "base_cpu_seconds": cpu["base"],
                "repal_cpu_seconds": cpu["repal"],
                "cpu_ratio_repal_over_base": round(repal_cpu / base_cpu, 3),
                "masking_seconds": round(mask_seconds, 3),
                "fit_seconds": round(fit_seconds, 3),
                "fit_sentences": args.fit_sentences,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
