"""``benchharness analyze A B ...``: alignment, uniformity, cosine per gold level and isotropy on
STS-B test for several encoders, written as JSON and as figures holding all of them."""

from __future__ import annotations

import argparse

from benchharness.cli.options import add_data_options, add_encoding_options

HELP = "alignment, uniformity, cosine per gold level, isotropy on STS-B (JSON + PNG/SVG/PDF figures)"
FORMATS = ("png", "svg", "pdf")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("encoders", nargs="+", help="names or specs (see `list encoders`); all go in the same figures")
    p.add_argument(
        "--out",
        default="benchharness-analysis",
        help="folder for <encoder>.json and the figures (default: ./benchharness-analysis)",
    )
    p.add_argument(
        "--formats",
        default=",".join(FORMATS),
        help=f"comma list of figure formats among {', '.join(FORMATS)} (default: all)",
    )
    add_encoding_options(p)
    add_data_options(p)


def main(args: argparse.Namespace) -> int:
    from benchharness import tasks
    from benchharness.cli.options import check_output, data_root, resolver
    from benchharness.core.errors import InvalidInputError
    from benchharness.reporting.analysis_report import analyze, write

    formats = tuple(f.strip().lower() for f in args.formats.split(",") if f.strip())
    if not formats or set(formats) - set(FORMATS):
        raise InvalidInputError(f"--formats {args.formats!r}: choose among {', '.join(FORMATS)}")
    out = check_output(args.out, "folder", "--out")
    data = data_root(args)
    names = resolver(args, data)
    for name in args.encoders:
        names.check(name)  # every name, before any model loads
    task = tasks.get("STSBenchmark")
    task.load(data)
    first, second, gold = task.subsets["test"]  # type: ignore[attr-defined]
    reports = []
    for name in args.encoders:
        report, cosine = analyze(names.get(name), name, first, second, gold)
        reports.append((report, cosine))
        iso = report["isotropy"]
        print(
            f"{name}: alignment {report['alignment']:.4f}, uniformity {report['uniformity']:.4f}, "
            f"mean random-pair cosine {iso['mean_random_pair_cosine']:.4f}, top-1 PC variance share "
            f"{iso['top1_pc_variance_share']:.4f}"
        )
        for level in report["cosine_by_gold_level"]:
            print(f"  gold {level['level']}: n={level['n']}, mean cosine {level['mean']:.4f}, var {level['var']:.4f}")
    written = write(reports, gold, out, formats)
    print(f"written to {out}: {', '.join(p.name for p in written)}")
    return 0
