"""``benchharness analyze A B ...``: alignment, uniformity, cosine per gold level and isotropy on
STS-B test for several encoders, written as JSON and as figures holding all of them."""

from __future__ import annotations

import argparse

from benchharness.cli.options import add_data_options, add_encoding_options

HELP = "alignment, uniformity, cosine per gold level, isotropy and the size curve on STS-B (JSON + PNG/SVG/PDF figures)"
FORMATS = ("png", "svg", "pdf")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "encoders",
        nargs="+",
        help="names or specs (see `list encoders`); all go in the same figures. A value list adds sizes: "
        "'minilm-l6' 'minilm-l6+truncate(d=64|128)' draws the size curve too",
    )
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
    from benchharness.core.specs import expand_variants
    from benchharness.reporting.analysis_report import analyze, write

    formats = tuple(f.strip().lower() for f in args.formats.split(",") if f.strip())
    if not formats or set(formats) - set(FORMATS):
        raise InvalidInputError(f"--formats {args.formats!r}: choose among {', '.join(FORMATS)}")
    out = check_output(args.out, "folder", "--out")
    data = data_root(args)
    names = resolver(args, data)
    encoders = list(dict.fromkeys(v for name in args.encoders for v in expand_variants(name)))
    for name in encoders:
        names.check(name)  # every name, before any model loads
    task = tasks.get("STSBenchmark")
    task.load(data)
    first, second, gold = task.subsets["test"]  # type: ignore[attr-defined]
    reports = []
    for name in encoders:
        report, cosine = analyze(names.get(name), name, first, second, gold)
        reports.append((report, cosine))
        iso, rho, size = report["isotropy"], report["spearman"], report["size"]
        print(
            f"{name}: STS-B test Spearman {rho['score']:.2f} [{rho['ci'][0]:.2f}, {rho['ci'][1]:.2f}], "
            f"{size['bytes_per_vector']:g} bytes a vector, alignment {report['alignment']:.4f}, "
            f"uniformity {report['uniformity']:.4f}, "
            f"mean random-pair cosine {iso['mean_random_pair_cosine']:.4f}, top-1 PC variance share "
            f"{iso['top1_pc_variance_share']:.4f}"
        )
        for level in report["cosine_by_gold_level"]:
            print(f"  gold {level['level']}: n={level['n']}, mean cosine {level['mean']:.4f}, var {level['var']:.4f}")
    written = write(reports, gold, out, formats)
    print(f"written to {out}: {', '.join(p.name for p in written)}")
    return 0
