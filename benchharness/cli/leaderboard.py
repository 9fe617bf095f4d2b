"""``benchharness leaderboard``: stored results beside the papers' published numbers."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "Markdown table of stored results beside published numbers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir")
    p.add_argument("--papers", help="comma list of papers whose published rows to show (default: all; 'none')")
    p.add_argument("--published-dir",
                   help="folder of published-number CSVs (default: this checkout's results/published)")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.options import result_store
    from benchharness.reporting.leaderboard import PUBLISHED_DIR, render

    papers = None if not args.papers else (set() if args.papers == "none" else set(args.papers.split(",")))
    published = Path(args.published_dir) if args.published_dir else PUBLISHED_DIR
    text = render(result_store(args), published, papers)
    if args.output:
        from benchharness.core.atomic import write_text

        write_text(args.output, text + "\n")
    else:
        print(text)
    return 0
