"""``benchharness leaderboard``: stored results beside the papers' published numbers, as Markdown,
CSV, booktabs LaTeX or HTML, filtered by encoder, task and row group."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

HELP = "leaderboard of stored results beside published numbers (md, csv, latex, html)"


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir")
    p.add_argument("--encoders", type=comma_list, help="comma list of encoder names or shell patterns ('minilm-*'); "
                   "published rows are left out when given")
    p.add_argument("--tasks", type=comma_list, help="comma list of tasks and task groups (sts, transfer, ...)")
    p.add_argument("--groups", type=comma_list,
                   help="comma list of row groups to show: base, post-processed, trained, published (default: all)")
    p.add_argument("--no-published", action="store_true", help="leave out the papers' published rows")
    p.add_argument("--papers", help="comma list of papers whose published rows to show (default: all; 'none')")
    p.add_argument("--published-dir",
                   help="folder of published-number CSVs (default: this checkout's results/published)")
    p.add_argument("--format", default=None, choices=("md", "csv", "latex", "html"),
                   help="output format (default: from the --output suffix, else md)")
    p.add_argument("--intervals", action=argparse.BooleanOptionalAction, default=None,
                   help="the 95%% interval tables (default: on for md, csv and html, off for latex)")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")


_SUFFIXES = {".md": "md", ".csv": "csv", ".tex": "latex", ".html": "html", ".htm": "html"}


def results_label(root: Path) -> str:
    """The results folder as the header names it: relative to here when inside, never a machine path
    for the default."""
    try:
        return f"{root.resolve().relative_to(Path.cwd().resolve())}/"
    except ValueError:
        return f"{os.path.normpath(root)}/"


def task_selection(selection: list[str], stored: set[str]) -> set[str]:
    """Task and group names expanded; a stored task no provider knows (an mteb or file task) as is."""
    from benchharness import tasks

    out: set[str] = set()
    for item in selection:
        try:
            out.update(tasks.resolve(item))
        except tasks.UnknownTaskError:
            if item not in stored:
                raise
            out.add(item)
    return out


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.options import result_store
    from benchharness.reporting.leaderboard import PUBLISHED_DIR, build
    from benchharness.reporting.table_formats import render

    fmt = args.format or _SUFFIXES.get(Path(args.output).suffix.lower() if args.output else "", "md")
    papers = None if not args.papers else (set() if args.papers == "none" else set(args.papers.split(",")))
    published = Path(args.published_dir) if args.published_dir else PUBLISHED_DIR
    store = result_store(args)
    groups = set(args.groups) if args.groups else None
    if args.no_published:
        from benchharness.reporting.leaderboard import GROUPS

        groups = (groups or set(GROUPS)) - {"published"}
    tasks = task_selection(args.tasks, {r.task for r in store}) if args.tasks else None
    board = build(store, published, papers, encoders=args.encoders, tasks=tasks, groups=groups,
                  results_label=results_label(store.root))
    intervals = args.intervals if args.intervals is not None else fmt != "latex"
    text = render(board, fmt, intervals)
    if args.output:
        from benchharness.core.atomic import write_text

        write_text(args.output, text + "\n")
    else:
        print(text)
    return 0
