"""``benchharness report``: one self-contained HTML page of the stored results (works offline)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchharness.cli.leaderboard import comma_list

HELP = "one self-contained HTML page: leaderboard, bars with intervals, significance, analysis, provenance"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="folder to write index.html into")
    p.add_argument("--results-dir")
    p.add_argument("--encoders", type=comma_list, help="comma list of encoder names or shell patterns")
    p.add_argument("--tasks", type=comma_list, help="comma list of tasks and task groups")
    p.add_argument("--no-published", action="store_true", help="leave out the papers' published rows")
    p.add_argument("--published-dir", help="folder of published-number CSVs (default: the package's)")
    p.add_argument("--analysis", help="a folder written by `benchharness analyze` whose figures to include")


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.leaderboard import published_dir, results_label, stored_results, task_selection
    from benchharness.cli.options import check_output
    from benchharness.core.errors import MissingFileError
    from benchharness.reporting.html_report import write_report
    from benchharness.reporting.leaderboard import GROUPS

    check_output(args.out, "folder", "--out")
    if args.analysis and not Path(args.analysis).is_dir():
        raise MissingFileError(
            f"--analysis {args.analysis}: no such folder (`benchharness analyze A B --out {args.analysis}` writes one)"
        )
    store = stored_results(args)
    published = published_dir(args)
    tasks = task_selection(args.tasks, {r.task for r in store}, args.configuration)[0] if args.tasks else None
    path = write_report(
        store,
        Path(args.out),
        published,
        analysis_dir=Path(args.analysis) if args.analysis else None,
        results_label=results_label(store.root),
        encoders=args.encoders,
        tasks=tasks,
        groups=set(GROUPS) if args.no_published else None,
        config=args.configuration,
    )
    print(f"written: {path}")
    return 0
