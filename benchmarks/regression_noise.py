"""How far do stored STS metrics move under float noise alone? Sets the regression tolerance.

The same model on another CPU of this kind runs other GEMM blockings (thread count) and other
batch compositions (padding length); float32 sums then differ in their last bits, a few cosines
swap rank, and a Spearman moves in its 4th decimal (x100 scale). This script reruns the STS suite
of an encoder under several thread counts and batch sizes, and prints, per metric, the largest
deviation from the stored result, so the tolerance of ``tests/regression/test_regression.py`` comes from a
measurement rather than a guess.

    python benchmarks/regression_noise.py --encoder minilm-l3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from machine import SMOKE

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="minilm-l3")
    parser.add_argument("--threads", default="1,2", help="comma list of torch thread counts")
    parser.add_argument("--batch-sizes", default="7,32,128", help="comma list of encoder batch sizes")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(encoder="glove-50d", threads="1", batch_sizes="32")
    args = parser.parse_args()

    import torch

    import benchharness
    from benchharness import tasks

    names = ["STSBenchmark"] if SMOKE else tasks.resolve("sts")
    stored = {n: json.loads((ROOT / "results" / args.encoder / f"{n}.json").read_text())["metrics"] for n in names}
    worst: dict[str, float] = {}
    for threads in (int(t) for t in args.threads.split(",")):
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            torch.set_num_threads(threads)
            # no embedding cache: every setting encodes afresh
            fresh_all = {r.task: r.metrics for r in benchharness.evaluate(args.encoder, names, batch_size=batch)}
            deviation = 0.0
            for n in names:
                fresh = fresh_all[n]
                for key, value in stored[n].items():
                    if isinstance(value, (int, float)) and key in fresh:
                        d = abs(fresh[key] - value)
                        worst[f"{n}/{key}"] = max(worst.get(f"{n}/{key}", 0.0), d)
                        deviation = max(deviation, d)
            print(
                f"threads={threads} batch={batch}: largest |fresh - stored| = {deviation:.5f} (x100 scale)", flush=True
            )
    top = sorted(worst.items(), key=lambda kv: -kv[1])[:5]
    print("largest deviations over all settings:")
    for key, d in top:
        print(f"  {key}: {d:.5f}")


if __name__ == "__main__":
    main()
