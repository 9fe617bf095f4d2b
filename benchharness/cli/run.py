"""``benchharness run``: evaluate encoders on tasks and store one result per pair (or, with
``--verify``, check that a fresh computation reproduces the stored results)."""

from __future__ import annotations

import argparse

from benchharness.cli.options import add_data_options, data_root, resolver, result_store
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import non_negative_int, positive_int

HELP = "evaluate encoders on tasks and store one result per pair"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encoders", required=True, help="comma list of names/specs (see `list encoders`)")
    p.add_argument("--tasks", required=True, help="comma list of tasks or groups (see `list tasks`)")
    p.add_argument("--overwrite", choices=["reuse", "stale", "always"], default="reuse",
                   help="reuse stored results (default), recompute stale ones, or recompute all")
    p.add_argument("--seed", type=non_negative_int, default=1111)
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--cache-dir", help="embedding cache (default from benchharness.toml)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--verify", action="store_true",
                   help="recompute everything from scratch (no cache, nothing stored) and check that it reproduces "
                        "the stored results within the regression tolerance; exit 1 if not")
    p.add_argument("--add-items", action="store_true",
                   help="also recompute stored results that lack per-item outputs (needed by `compare` and the "
                        "leaderboard's marks); their scores do not change")
    p.add_argument("--no-train", action="store_true",
                   help="fail on a training recipe that has no run yet (printing the command that trains it) "
                        "instead of training it first")
    add_data_options(p)


def main(args: argparse.Namespace) -> int:
    from benchharness import tasks
    from benchharness.core.specs import split_outside_parentheses
    from benchharness.evaluation.runner import run

    task_names = tasks.resolve(args.tasks)
    if not task_names:
        raise InvalidInputError(f"--tasks {args.tasks!r} names no task; give a comma list of tasks or groups "
                                "(see `benchharness list tasks`)")
    if args.device is not None:  # before any model loads: a typo or a missing GPU fails here
        from benchharness.core.devices import pick_device

        pick_device(args.device)
    data = data_root(args)
    names = resolver(args, data, train_missing=not args.no_train, progress=not args.quiet)
    encoder_names = [n.strip() for n in split_outside_parentheses(args.encoders, ",") if n.strip()]
    if not encoder_names:
        raise InvalidInputError(f"--encoders {args.encoders!r} names no encoder; give a comma list of names or specs "
                                "(see `benchharness list encoders`)")
    for name in encoder_names:  # fail fast on typos and missing folders, before any model is loaded
        names.check(name)
    store = result_store(args)
    if args.verify:
        return _verify(encoder_names, task_names, names.defaults, data, store, args)
    summary = run(encoder_names, task_names, names.get, tasks.get, data, store, overwrite=args.overwrite,
                  seed=args.seed, show_progress=not args.quiet, add_items=args.add_items)
    from tabulate import tabulate

    print(tabulate([[o.encoder, o.task, o.status, "" if o.main_score is None else f"{o.main_score:.2f}", o.message]
                    for o in summary.outcomes], headers=["encoder", "task", "status", "main score", "note"],
                   tablefmt="github"))
    print(f"results in {store.root}")
    return 1 if summary.failed else 0


def _verify(encoder_names: list[str], task_names: list[str], defaults: dict, data, store, args: argparse.Namespace
            ) -> int:
    """``run --verify``: encode and evaluate afresh into a scratch store (the embedding cache is
    bypassed, so the models really run), then compare each result with the stored one."""
    import tempfile

    from tabulate import tabulate

    from benchharness import tasks
    from benchharness.core.results import ResultStore
    from benchharness.evaluation.resolver import Resolver
    from benchharness.evaluation.runner import run
    from benchharness.evaluation.verify import TOLERANCE, compare

    fresh = Resolver(defaults)  # same defaults, no caching wrapper
    with tempfile.TemporaryDirectory(prefix="benchharness-verify-") as scratch:
        fresh_store = ResultStore(scratch)
        summary = run(encoder_names, task_names, fresh.get, tasks.get, data, fresh_store, overwrite="always",
                      seed=args.seed, show_progress=not args.quiet)
        checks = [compare(store.load(o.encoder, o.task), fresh_store.load(o.encoder, o.task))
                  for o in summary.outcomes if o.status == "computed"]
    rows = [[c.encoder, c.task, "" if c.stored is None else f"{c.stored:.2f}", f"{c.fresh:.2f}",
             "" if c.max_deviation is None else f"{c.max_deviation:.4f}", c.verdict] for c in checks]
    rows += [[o.encoder, o.task, "", "", "", f"failed: {o.message}"] for o in summary.failed]
    print(tabulate(rows, headers=["encoder", "task", "stored", "fresh", "max |diff| (all metrics)", "verdict"],
                   tablefmt="github", disable_numparse=True))
    good = sum(c.ok for c in checks)
    print(f"{good} of {len(checks) + len(summary.failed)} stored results reproduced within {TOLERANCE} (x100) "
          f"from {store.root}; nothing was written there")
    return 0 if good == len(checks) and not summary.failed else 1
