"""``benchharness data status|download``: which evaluation files are present and intact, and
fetching them for users who are online."""

from __future__ import annotations

import argparse

from benchharness.cli.options import add_data_options

HELP = "show or download evaluation data"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["status", "download"])
    p.add_argument("datasets", nargs="*", help="for download: senteval glove askubuntu qqp nli nltk")
    add_data_options(p)


def main(args: argparse.Namespace) -> int:
    from benchharness.core.data_root import SOURCES, DataRoot, download

    data = DataRoot(args.data_dir)
    if args.action == "status":
        from tabulate import tabulate

        rows = data.status()
        print(f"data root: {data.root}")
        print(tabulate([[r["file"], r["state"]] for r in rows], headers=["file", "state"], tablefmt="github"))
        print("\nsources:\n" + "\n".join(f"  {s.name:10s} {s.url}\n             {s.note}" for s in SOURCES.values()))
        return 0
    for name in args.datasets or list(SOURCES):
        print(f"downloading {name} into {download(name, data.root)}")
    return 0
