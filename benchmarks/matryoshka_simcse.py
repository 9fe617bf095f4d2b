"""Does a Matryoshka loss make SimCSE lose less when its vectors are cut short, and is the gain real?

Trains the ``simcse`` recipe (paraphrase-MiniLM-L3-v2, the cpu preset: 150 steps of 32 sentences)
with and without ``matryoshka_dims`` at each seed, evaluates every run truncated to each size on
STS-B and SICK-R (each run's base encoding shared by its sizes through one cache), and compares the
two at each size: per seed, the paired tests of ``benchharness compare`` (bootstrap interval,
permutation p), Holm-adjusted over every seed, size and task together; across seeds, the mean
difference with a t interval over the seeds. Writes ``results/benchmarks/matryoshka_simcse.txt``
and the training guide's figure ``docs/matryoshka-curve.png``::

    python benchmarks/matryoshka_simcse.py --seeds 42,43,44 --work ../matryoshka-runs

The runs are kept in ``--work`` (a rerun reuses finished runs). Smoke mode trains a tiny random BERT
for two steps at sizes 32 and 8 on SICK-R's trial split.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from machine import SMOKE, config, data_root, header, report, results_folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the smoke run's tiny model comes from the tests' helpers
DIMS = (384, 256, 128, 64, 32)
TASKS = ("STSBenchmark", "SICKRelatedness")
VARIANTS = ("simcse", "simcse-matryoshka")


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t interval over seeds (the interval is the mean alone for one seed)."""
    import numpy as np
    from scipy import stats

    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, len(values) - 1) * stats.sem(values))
    return mean, mean - half, mean + half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="42,43,44", help="training seeds, comma-separated")
    parser.add_argument("--work", type=Path, help="where the runs are kept (default: a temporary folder)")
    args = parser.parse_args()

    from benchharness.core.settings import apply_environment

    apply_environment(config())  # this script owns its process: the offline hub cache, before the hub loads
    head = header()  # the load before this script's own work
    import benchharness
    from benchharness.reporting.size_curve import SizePoint, group_sizes, size_figure
    from benchharness.scoring.stats import holm

    seeds = [int(s) for s in args.seeds.split(",")][:1] if SMOKE else [int(s) for s in args.seeds.split(",")]
    dims = (32, 8) if SMOKE else DIMS
    tasks = ["SICKRelatedness-trial"] if SMOKE else list(TASKS)
    spare = tempfile.TemporaryDirectory()
    work = args.work or Path(spare.name)
    settings: dict = {"max_steps": 2, "batch_size": 8, "eval_every": 0} if SMOKE else {}
    if SMOKE:  # a randomly initialised two-layer BERT of width 32 with MiniLM's tokenizer
        from tests.helpers import make_tiny_bert

        settings["base"] = str(make_tiny_bert(work / "tiny-base"))
    sizes = "|".join(map(str, dims))

    scores: dict[tuple[str, int, int, str], float] = {}  # (variant, seed, d, task) -> score
    rows = []  # (seed, d, task, Row)
    for seed in seeds:
        results = {}
        for variant in VARIANTS:
            folder = work / f"{variant}-s{seed}"
            extra = {"matryoshka_dims": dims} if variant.endswith("matryoshka") else {}
            if not (folder / "manifest.json").is_file():
                benchharness.train("simcse", seed=seed, out=str(folder), data_dir=data_root().root, **settings, **extra)
            results[variant] = benchharness.evaluate(
                f"{folder}+truncate(d={sizes})", tasks, data_dir=data_root().root, cache_dir=work / "cache"
            )
            for result in results[variant].results:
                d = int(result.encoder.rsplit("truncate(d=", 1)[1].rstrip(")"))
                scores[(variant, seed, d, result.task)] = result.main_score
        for d in dims:
            plain, sized = (next(e for e in results[v].encoders if e.endswith(f"truncate(d={d})")) for v in VARIANTS)
            table = benchharness.compare(
                results["simcse-matryoshka"], results["simcse"], encoder_a=sized, encoder_b=plain
            )
            rows += [(seed, d, row.task, row) for row in table.rows if not row.task.startswith("Avg.")]
    adjusted = holm([row.p_value for *_, row in rows])

    lines = [head, "", f"simcse on paraphrase-MiniLM-L3-v2, cpu preset; matryoshka_dims={','.join(map(str, dims))}"]
    lines += [
        "",
        "Per seed: A = with the Matryoshka loss, B = without, both truncated to d. A-B with its 95% paired-bootstrap",
        "interval; p: paired permutation test; Holm over every seed, size and task below.",
        "",
        "| seed | d | task | without | with | with - without | 95% CI | p | p (Holm) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (seed, d, task, row), p_holm in zip(rows, adjusted):
        lines.append(
            f"| {seed} | {d} | {task} | {row.score_b:.2f} | {row.score_a:.2f} | {row.difference:+.2f} | "
            f"[{row.low:+.2f}, {row.high:+.2f}] | {row.p_value:.3g} | {p_holm:.3g} |"
        )
    lines += [
        "",
        f"Across {len(seeds)} seed(s): mean Spearman x 100 with a 95% t interval over the seeds.",
        "",
        "| d | task | without | with | with - without |",
        "|---|---|---|---|---|",
    ]
    points = []
    for task in tasks:
        for d in dims:
            per = {v: [scores[(v, s, d, task)] for s in seeds] for v in VARIANTS}
            diff = t_interval([a - b for a, b in zip(per["simcse-matryoshka"], per["simcse"])])
            cells = []
            for variant in VARIANTS:
                mean, low, high = t_interval(per[variant])
                cells.append(f"{mean:.2f} [{low:.2f}, {high:.2f}]")
                # a size's bytes: d float32 values; the curve's point is the seeds' mean and interval
                points.append(SizePoint(f"{variant}+truncate(d={d})", task, "spearman", mean, (low, high), 4.0 * d))
            change = f"{diff[0]:+.2f} [{diff[1]:+.2f}, {diff[2]:+.2f}]"
            lines.append(f"| {d} | {task} | {cells[0]} | {cells[1]} | {change} |")
    figure = size_figure(group_sizes(points))
    out = (results_folder() if SMOKE else ROOT / "docs") / "matryoshka-curve.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=150, bbox_inches="tight", metadata={"Software": None})
    report("matryoshka_simcse", [*lines, "", f"figure: {out.name} (each point: the seeds' mean and its t interval)"])
    spare.cleanup()


if __name__ == "__main__":
    main()
