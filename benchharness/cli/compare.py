"""``benchharness compare A B``: paired tests on two encoders' stored per-item outputs."""

from __future__ import annotations

import argparse

HELP = "paired comparison of two encoders' stored results (no encoding)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="encoder A (as named in results/)")
    p.add_argument("b", help="encoder B")
    p.add_argument("--tasks", required=True, help="comma list of tasks or groups (see `list tasks`)")
    p.add_argument("--results-dir")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap and permutation resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")


def main(args: argparse.Namespace) -> int:
    from benchharness import tasks
    from benchharness.cli.options import result_store
    from benchharness.reporting.compare import compare_stored, render

    rows = compare_stored(
        result_store(args), args.a, args.b, tasks.resolve(args.tasks, args.configuration), args.resamples, args.seed
    )
    print(render(rows, args.a, args.b))
    return 0
