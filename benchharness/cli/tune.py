"""``benchharness tune <post-processor>``: a ``tuners`` plugin's grid search on a dev split."""

from __future__ import annotations

import argparse

from benchharness.cli.options import add_unavailable, raise_unavailable
from benchharness.core.plugins import PLUGINS

HELP = "tune a post-processor's parameters on a dev set and register the result"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="post", required=True)
    for name, tuner in PLUGINS.load_all("tuners").items():
        tuner.add_arguments(sub.add_parser(name, help=tuner.HELP))
    add_unavailable(sub, "tuners")


def main(args: argparse.Namespace) -> int:
    """A tuner's ``main`` returns its output, printed here (or, as commands do, an exit code). The
    runs folder it registers the winner in is checked first, before the grid's work."""
    from benchharness.cli.options import check_output

    raise_unavailable(args)
    check_output(args.configuration.runs_dir, "folder", "the runs folder")
    out = PLUGINS.get("tuners", args.post).main(args)
    if isinstance(out, str):
        print(out)
        return 0
    return int(out)
