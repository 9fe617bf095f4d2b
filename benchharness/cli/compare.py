"""``benchharness compare A B``: paired tests on two encoders' stored per-item outputs."""

from __future__ import annotations

import argparse

HELP = "paired comparison of two encoders' stored results (no encoding)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "a",
        help="encoder A (as named in results/); with a value list, its sizes (x+truncate(d=32|64)), each "
        "compared with B, the full vector, and marked where significantly below it",
    )
    p.add_argument("b", help="encoder B")
    p.add_argument("--tasks", required=True, help="comma list of tasks or groups (see `list tasks`)")
    p.add_argument("--results-dir")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap and permutation resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")


def main(args: argparse.Namespace) -> int:
    from benchharness import tasks
    from benchharness.cli.options import result_store
    from benchharness.core.specs import expand_variants
    from benchharness.reporting.compare import compare_sizes, compare_stored, render, stored_pairs

    store, task_names = result_store(args), tasks.resolve(args.tasks, args.configuration)
    sizes = expand_variants(args.a)
    if len(sizes) > 1:
        pairs = stored_pairs(store, sizes, args.b, task_names)
        print(compare_sizes(pairs, args.b, args.resamples, args.seed))
        return 0
    rows = compare_stored(store, args.a, args.b, task_names, args.resamples, args.seed)
    print(render(rows, args.a, args.b))
    return 0
