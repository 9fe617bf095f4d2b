"""``benchharness compare A B``: paired tests on two encoders' stored per-item outputs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchharness.reporting.board import ImportedModel

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
    p.add_argument(
        "--mteb-results",
        metavar="FOLDER",
        help="B is a model of this mteb results folder (mteb's results repository, or what `export mteb` wrote), "
        "as mteb names it (org/model): its published scores beside A's, without a test",
    )


def main(args: argparse.Namespace) -> int:
    from benchharness import tasks
    from benchharness.cli.options import result_store
    from benchharness.core.specs import expand_variants
    from benchharness.reporting.compare import compare_published, compare_sizes, compare_stored, render, stored_pairs

    store, task_names = result_store(args), tasks.resolve(args.tasks, args.configuration)
    if args.mteb_results:
        print(compare_published(store, args.a, published_model(args.mteb_results, args.b), task_names))
        return 0
    sizes = expand_variants(args.a)
    if len(sizes) > 1:
        pairs = stored_pairs(store, sizes, args.b, task_names)
        print(compare_sizes(pairs, args.b, args.resamples, args.seed))
        return 0
    rows = compare_stored(store, args.a, args.b, task_names, args.resamples, args.seed)
    print(render(rows, args.a, args.b))
    return 0


def published_model(folder: str, name: str) -> ImportedModel:
    """The model ``name`` of the mteb results folder ``folder``; an unknown name lists those there."""
    import difflib

    from benchharness.cli.leaderboard import imported_models
    from benchharness.core.errors import InvalidInputError

    models = {m.name: m for m in imported_models([folder])}
    if name not in models:
        close = difflib.get_close_matches(name, list(models), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise InvalidInputError(
            f"no model {name!r} in the mteb results {folder}.{hint} It holds: {', '.join(sorted(models))}"
        )
    return models[name]
