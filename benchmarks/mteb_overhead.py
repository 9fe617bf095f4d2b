"""What does running the STS suite through mteb's evaluators cost, against a direct benchharness run?

This measures the time overhead of the mteb wrapper. mteb's STS tasks load their data from
the Hugging Face hub, which is not reachable offline, so the mteb side runs mteb's own STS
evaluation (``AbsTaskSTS`` and its evaluator, through ``mteb.evaluate`` and the ``MtebEncoder``
wrapper) on in-memory tasks holding benchharness's own pairs of each STS task, subsets merged as
mteb's STS12-16 are (``mteb_bridge.memory.sts_task``, as the cross-check tests do).

Both sides start from the same built encoder, without an embedding cache, so both encode:

* ``direct``: ``benchharness.evaluate`` on the 7 tasks: one pass over the unique sentences of
  all tasks, then each task's evaluation from that store;
* ``mteb``: ``run_task`` per task: mteb encodes each task's two sides (the wrapper joins mteb's
  batches into one ``encode`` call per side) and computes cosine, Manhattan and Euclidean scores.

The ratio ``mteb / direct`` is the overhead; sentences encoded per side are printed too, since
encoding dominates for a transformer and the two sides encode different amounts. Medians of
``--repeats`` runs; on a shared machine the absolute times mean little.

    PYTHONPATH=. python benchmarks/mteb_overhead.py [--encoders glove-50d,minilm-l3] [--repeats 3]

(from the checkout root, with the mteb extra installed; PYTHONPATH puts this checkout first)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))

from machine import SMOKE, config

from benchharness.core.settings import apply_environment, load_config

apply_environment(load_config())  # the HF cache before mteb imports huggingface_hub, which reads it once

import benchharness  # noqa: E402
from benchharness import tasks  # noqa: E402
from benchharness.core.data_root import DataRoot  # noqa: E402
from benchharness.core.encoder import Encoder  # noqa: E402
from benchharness.evaluation.embeddings import unique_sentences  # noqa: E402
from benchharness.evaluation.resolver import Resolver  # noqa: E402
from benchharness.evaluation.run_settings import RunSettings  # noqa: E402
from benchharness.mteb_bridge.evaluate import run_task  # noqa: E402
from benchharness.mteb_bridge.memory import sts_task  # noqa: E402

#: the STS suite (smoke mode: SICK-R's 500 trial pairs)
STS = ["SICKRelatedness-trial"] if SMOKE else tasks.resolve("sts")


class Counting(Encoder):
    """Counts the sentences the wrapped encoder is asked to encode."""

    def __init__(self, inner: Encoder) -> None:
        super().__init__(inner.name)
        self.inner, self.count = inner, 0

    def encode(self, sentences):
        self.count += len(sentences)
        return self.inner.encode(sentences)

    def identity_info(self):
        return self.inner.identity_info()


def direct(encoder: Counting, data: DataRoot) -> float:
    t0 = time.perf_counter()  # nothing stored, no embedding cache: every task is computed
    benchharness.evaluate(encoder, STS, data_dir=data.root)
    return time.perf_counter() - t0


def through_mteb(encoder: Counting, data: DataRoot) -> float:
    t0 = time.perf_counter()  # reading the files counts on both sides (the runner reads and checks them)
    for name in STS:
        task = tasks.get(name)
        task.load(data)
        first = [s for a, _, _ in task.subsets.values() for s in a]
        second = [s for _, b, _ in task.subsets.values() for s in b]
        gold = [float(x) for _, _, g in task.subsets.values() for x in g]
        run_task(encoder, sts_task("X" + task.name.replace("-", ""), first, second, gold))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoders", default="glove-50d", help="comma list of encoder names")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", help="data root (default: as the CLI)")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(repeats=1)
    args = parser.parse_args()
    data = DataRoot(config().data_root(args.data_dir))
    loaded = [tasks.get(name) for name in STS]
    for task in loaded:
        task.load(data)
    n_unique = len(unique_sentences(loaded))
    registry = Resolver(settings=RunSettings(data_dir=data.root))
    print(f"STS suite: {', '.join(STS)}; {n_unique} unique sentences; median of {args.repeats} runs")
    print(
        f"{'encoder':12s} {'direct s':>9s} {'mteb s':>9s} {'ratio':>6s} {'encoded direct':>15s} {'encoded mteb':>13s}"
    )
    for name in (n.strip() for n in args.encoders.split(",") if n.strip()):
        encoder = Counting(registry.get(name))
        encoder.encode(["warm up"])  # model loading is outside both timings
        times = {"direct": [], "mteb": []}
        counts = {}
        for _ in range(args.repeats):
            for side, fn in (("direct", direct), ("mteb", through_mteb)):
                encoder.count = 0
                times[side].append(fn(encoder, data))
                counts[side] = encoder.count
        d, m = statistics.median(times["direct"]), statistics.median(times["mteb"])
        print(f"{name:12s} {d:9.2f} {m:9.2f} {m / d:6.2f} {counts['direct']:15d} {counts['mteb']:13d}")


if __name__ == "__main__":
    main()
