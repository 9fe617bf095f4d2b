"""SentEval's further tasks beside the seven: scores and evaluation time per task of glove-50d and
minilm-l6 on SST5, SICKEntailment, SICKRelatedness-sup and STSBenchmark-sup (default config), with
the seven transfer tasks timed in the same run, and a table of every SentEval task saying whether
its data is here.

Each encoder runs once through ``benchharness.evaluate`` over the eleven tasks: the sentences of
all of them are encoded in one pass (its time is reported once), then each task's classifier or
regressor runs; the time per task is the result's ``evaluate_seconds`` (training and scoring, from
embeddings in memory), the number the seven's stored results record too. Intervals are the
results' own (95% percentile bootstrap).

    python benchmarks/senteval_extra.py [--encoders glove-50d,minilm-l6] [--no-seven]
"""

from __future__ import annotations

import argparse
import os
import time

from machine import SMOKE, data_root, header, report

FOUR = ("SST5", "SICKEntailment", "SICKRelatedness-sup", "STSBenchmark-sup")
SEVEN = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
#: tasks of SentEval's list the harness does not offer, and why
NOT_OFFERED = {
    "ImageCaptionRetrieval": "not offered: ranks COCO images, needs SentEval's ResNet-101 image features, not sentences"
}


def availability() -> list[str]:
    """One row per SentEval task: whether its files are here, else the first line of why not."""
    from benchharness import tasks
    from benchharness.core.data_root import DataError

    data = data_root()
    rows = []
    for name in [*tasks.resolve("senteval-all"), *NOT_OFFERED]:
        if name in NOT_OFFERED:
            rows.append(f"| {name} | no | {NOT_OFFERED[name]} |")
            continue
        task = tasks.get(name)
        try:
            task.load(data)
            state, why = "yes", f"{task.metadata.family}; protocol {task.metadata.protocol}"
        except DataError as exc:
            message = str(exc).splitlines()
            hint = next((line.strip() for line in message[1:] if line.strip().startswith("get it with")), "")
            why = "; ".join(part.split(" or point")[0].split(" (or point")[0] for part in (message[0], hint) if part)
            state, why = "no", why.replace(str(data.root.absolute()), "$BENCHHARNESS_DATA")
        rows.append(f"| {name} | {state} | {why} |")
    return ["| task | runnable here | why |", "|---|---|---|", *rows]


def _score(result) -> str:
    low, high = result.confidence["main"] if result.confidence else (float("nan"), float("nan"))
    text = f"{result.main_score:.2f} [{low:.2f}, {high:.2f}]"
    if result.main_metric == "pearson":
        m = result.metrics
        text += f"; Spearman {m['spearman']:.2f}, MSE {m['mse']:.3f}, dev Pearson {m['devpearson']:.2f}"
        text += f", best check {m['best_epoch']}, stopped {m['stop_epoch']}"
    else:
        text += f"; dev {result.metrics.get('devacc')}, L2 {result.metrics.get('chosen_l2')}"
    return text


def measure(encoder: str, names: list[str]) -> list[str]:
    # torch, scikit-learn and scipy imported before the clock starts: the first task evaluated
    # would otherwise pay for them
    import scipy.stats  # noqa: F401

    import benchharness
    import benchharness.tasks.senteval.classifier

    t0 = time.perf_counter()
    results = benchharness.evaluate(encoder, names)
    wall = time.perf_counter() - t0
    first = results.results[0].timings
    sentences, seconds = first["sentences_encoded_all_tasks"], first["encode_seconds_all_tasks"]
    lines = [
        f"## {encoder}: {len(names)} tasks, {wall:.0f} s; one encoding pass: {sentences:,} sentences, {seconds:.1f} s",
        "| task | metric | score [95% CI]; details | evaluate s | peak RSS MiB |",
        "|---|---|---|---|---|",
    ]
    for r in results.results:
        lines.append(
            f"| {r.task} | {r.main_metric} | {_score(r)} | {r.timings['evaluate_seconds']:.1f} | "
            f"{r.timings['peak_rss_mb']:.0f} |"
        )
    four = sum(r.timings["evaluate_seconds"] for r in results.results if r.task in FOUR)
    seven = sum(r.timings["evaluate_seconds"] for r in results.results if r.task in SEVEN)
    lines.append(f"evaluate seconds: the four {four:.1f}" + (f", the seven {seven:.1f}" if seven else ""))
    return lines


def probing_cost(dims: tuple[int, ...], steps: int = 300) -> list[str]:
    """The probing tasks' data are not here: the MLP's cost per optimizer step on random features
    of a probing task's size (100k train rows, 2 classes, the 4 L2 values in lock step), per
    hidden size and dropout, and what one check (4 passes of 1,563 batches of 64) then costs."""
    import numpy as np

    from benchharness.tasks.senteval.config import CONFIGS, L2_GRID, PROBING_DROPOUT, PROBING_NHID
    from benchharness.tasks.senteval.mlp import BatchedMLP

    rng = np.random.default_rng(0)
    lines = [
        "| d | nhid | dropout | ms per step (4 models) | s per dev check (6,252 steps) |",
        "|---|---|---|---|---|",
    ]
    for dim in dims:
        features = rng.normal(size=(100_000, dim)).astype(np.float32)
        labels = rng.integers(0, 2, size=100_000)
        for nhid in PROBING_NHID:
            for dropout in (PROBING_DROPOUT[0], PROBING_DROPOUT[-1]):
                mlp = BatchedMLP(features, labels, 2, CONFIGS["default"], nhid, dropout, device="cpu")
                state = mlp.start(list(L2_GRID))
                order = rng.permutation(100_000)
                t0 = time.perf_counter()
                for i in range(steps):
                    mlp.step(state, order[64 * i : 64 * (i + 1)])
                per_step = (time.perf_counter() - t0) / steps
                lines.append(f"| {dim} | {nhid} | {dropout} | {1000 * per_step:.2f} | {per_step * 6252:.1f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoders", default="glove-50d,minilm-l6")
    parser.add_argument("--no-seven", action="store_true", help="time the four new tasks only")
    args = parser.parse_args()
    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    encoders = args.encoders.split(",")
    names = list(FOUR) + ([] if args.no_seven else list(SEVEN))
    if SMOKE:  # a tiny run: the code path, not a measurement (benchmarks/machine.py)
        encoders, names = ["glove-50d"], ["SICKEntailment-fast", "STSBenchmark-sup"]
    lines = [header(), f"torch threads: default; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"]
    for encoder in encoders:
        lines += ["", *measure(encoder, names)]
    lines += ["", "## every SentEval task: runnable here?", *availability()]
    lines += ["", "## probing MLP (default config), cost on random features of a probing task's size"]
    lines += probing_cost((50,) if SMOKE else (50, 384), steps=5 if SMOKE else 300)
    lines += ["", f"load at end: {os.getloadavg()[0]:.2f}"]
    report("senteval_extra", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
