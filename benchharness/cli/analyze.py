"""``benchharness analyze <encoder>``: alignment, uniformity, cosine per gold level and isotropy on
STS-B test, written as JSON and figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchharness.cli.options import add_data_options, add_encoding_options

HELP = "alignment, uniformity, cosine per gold level, isotropy on STS-B (JSON + PNG)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("encoder", help="name or spec (see `list encoders`)")
    p.add_argument("--out", help="folder for analysis/<encoder>.json and figures/ (default: the results dir)")
    add_encoding_options(p)
    add_data_options(p)


def main(args: argparse.Namespace) -> int:
    from benchharness import tasks
    from benchharness.cli.options import data_root, resolver, results_root
    from benchharness.reporting.analysis_report import analyze

    data = data_root(args)
    names = resolver(args, data)
    task = tasks.get("STSBenchmark")
    task.load(data)
    first, second, gold = task.subsets["test"]  # type: ignore[attr-defined]
    out = Path(args.out) if args.out else results_root(args)
    report = analyze(names.get(args.encoder), args.encoder, first, second, gold, out)
    iso = report["isotropy"]
    print(f"{args.encoder}: alignment {report['alignment']:.4f}, uniformity {report['uniformity']:.4f}, "
          f"mean random-pair cosine {iso['mean_random_pair_cosine']:.4f}, top-1 PC variance share "
          f"{iso['top1_pc_variance_share']:.4f}")
    for level in report["cosine_by_gold_level"]:
        print(f"  gold {level['level']}: n={level['n']}, mean cosine {level['mean']:.4f}, var {level['var']:.4f}")
    print(f"written: {out / 'analysis'} and {', '.join(report['figures'])}")
    return 0
