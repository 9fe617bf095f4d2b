"""``benchharness analyze A B ...``: alignment, uniformity, cosine per gold level and isotropy on
STS-B test for several encoders, written as JSON and as figures holding all of them; and, from the
results folder, quality against cost (bytes per document, operations per query-document pair) on
each task where a named sparse or multi-vector model has a stored search result."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.cli.options import add_data_options, add_encoding_options

HELP = (
    "alignment, uniformity, cosine per gold level, isotropy and the size curve on STS-B, and quality against "
    "cost from stored results (JSON + PNG/SVG/PDF figures)"
)
FORMATS = ("png", "svg", "pdf")

if TYPE_CHECKING:
    import numpy as np

    from benchharness.core.data_root import DataRoot
    from benchharness.evaluation.resolver import Resolver
    from benchharness.reporting.cost_curve import CostPoint


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "encoders",
        nargs="+",
        help="names or specs (see `list encoders`); all go in the same figures. A value list adds sizes: "
        "'minilm-l6' 'minilm-l6+truncate(d=64|128)' draws the size curve too. A sparse or multi-vector "
        "model is drawn against cost from its stored retrieval results (--results-dir), beside the dense "
        "ones named",
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
    from benchharness.cli.options import check_output, data_root, resolver, result_store
    from benchharness.core.errors import InvalidInputError
    from benchharness.core.specs import expand_variants
    from benchharness.reporting.analysis_report import write
    from benchharness.reporting.cost_curve import cost_lines, cost_points

    formats = tuple(f.strip().lower() for f in args.formats.split(",") if f.strip())
    if not formats or set(formats) - set(FORMATS):
        raise InvalidInputError(f"--formats {args.formats!r}: choose among {', '.join(FORMATS)}")
    out = check_output(args.out, "folder", "--out")
    data = data_root(args)
    names = resolver(args, data)
    encoders = list(dict.fromkeys(v for name in args.encoders for v in expand_variants(name)))
    for name in encoders:
        names.check(name)  # every name, before any model loads
    store = result_store(args)
    costs = cost_points(r for r in store if r.encoder in set(encoders))
    reports, gold = _geometry(names, encoders, data, costs, store.root)
    for task, points in costs.items():
        print(f"{task}: quality against cost")
        print("\n".join(cost_lines(points)))
    written = write(reports, gold, out, formats, costs)
    print(f"written to {out}: {', '.join(p.name for p in written)}")
    return 0


def _geometry(
    names: Resolver, encoders: list[str], data: DataRoot, costs: dict[str, list[CostPoint]], results: Path
) -> tuple[list[tuple[dict[str, Any], np.ndarray]], np.ndarray | None]:
    """The STS-B analysis of each dense encoder, printed as it comes, and the gold scores (None when
    no encoder is dense). Another kind has no vector a sentence to analyse: it is said whether the
    cost view has it; when none of them is dense and nothing has a cost, nothing can be drawn."""
    from benchharness import tasks
    from benchharness.core.errors import MissingFileError
    from benchharness.core.kinds import DENSE, SEARCH
    from benchharness.evaluation.kinds import kind_of
    from benchharness.reporting.analysis_report import analyze

    reports, pairs, others = [], None, []
    for name in encoders:
        encoder = names.get(name)
        if encoder.model_kind != DENSE:
            kind = kind_of(encoder)
            if any(p.encoder == name for points in costs.values() for p in points):
                where = "drawn against cost from its stored results"
            elif SEARCH not in kind.offers:
                where = "it searches no corpus, so it has no bytes per document to draw"
            else:
                where = (
                    f"no stored search result under {results}/ to draw against cost "
                    f"(`benchharness run --encoders '{name}' --tasks <a retrieval task>` stores one)"
                )
            print(f"{name}: {kind.title} ({kind.gives}), no STS-B geometry; {where}")
            others.append(name)
            continue
        if pairs is None:  # read when the first dense encoder needs it
            task = tasks.get("STSBenchmark")
            task.load(data)
            pairs = task.subsets["test"]  # type: ignore[attr-defined]
        first, second, gold = pairs
        report, cosine = analyze(encoder, name, first, second, gold)
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
    if not reports and not costs:
        raise MissingFileError(
            f"nothing to analyze: no single vector a sentence from {', '.join(others)} for STS-B, and no search "
            f"result of theirs under {results}/ to draw against cost; run them on a retrieval task first"
        )
    return reports, None if pairs is None else pairs[2]
