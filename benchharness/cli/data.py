"""``benchharness data status|download|migrate``: which evaluation files are present and intact,
fetching them for users who are online, and moving stores an older version wrote to the current
layout (once, so that no run looks for old layouts on its hot path)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchharness.cli.options import add_data_options, check_output, results_root

HELP = "show or download evaluation data; migrate old results and embedding caches"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["status", "download", "migrate"])
    p.add_argument("datasets", nargs="*", help="for download: senteval glove askubuntu qqp nli probing nltk")
    add_data_options(p)
    p.add_argument("--cache-dir", help="for migrate: the embedding cache (default from benchharness.toml)")


def main(args: argparse.Namespace) -> int:
    from benchharness.core.data_root import SOURCES, DataError, DataRoot, download

    if args.action == "migrate":
        return migrate(args)
    data = DataRoot(args.configuration.data_root(args.data_dir))
    if args.action == "status":
        from tabulate import tabulate

        rows = data.status()
        print(f"data root: {data.root}")
        print(tabulate([[r["file"], r["state"]] for r in rows], headers=["file", "state"], tablefmt="github"))
        print("\nsources:\n" + "\n".join(f"  {s.name:10s} {s.url}\n             {s.note}" for s in SOURCES.values()))
        return 0
    names = args.datasets or list(SOURCES)
    for name in names:  # every name and target folder, before the first download
        if name not in SOURCES:
            raise DataError(f"unknown dataset {name!r}; known: {', '.join(SOURCES)}")
        check_output(data.root / SOURCES[name].folder, "folder", f"the {name} folder")
    for name in names:
        print(f"downloading {name} into {download(name, data.root)}")
    return 0


def migrate(args: argparse.Namespace) -> int:
    """Import old ``shard-*.npz`` cache files and rename legacy result folders; print what moved."""
    from benchharness.evaluation.migrate import migrate as run_migration

    cache_dir = check_output(
        Path(args.cache_dir) if args.cache_dir else args.configuration.cache_dir, "folder", "--cache-dir"
    )
    report = run_migration(check_output(results_root(args), "folder", "--results-dir"), cache_dir)
    for identity, rows in report.imported_rows.items():
        print(f"embedding cache {cache_dir / identity}: imported {rows} rows of old shards")
    for old, new in report.renamed:
        print(f"results {old}/ -> {new}/")
    for folder, reason in report.kept:
        print(f"results {folder}/ left as it is: {reason}")
    if not (report.imported_rows or report.renamed or report.kept):
        print("nothing to migrate")
    return 0
