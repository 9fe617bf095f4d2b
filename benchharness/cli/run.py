"""``benchharness run``: evaluate encoders on tasks and store one result per pair (or, with
``--verify``, check that a fresh computation reproduces the stored results). A thin layer over
``benchharness.evaluate``: the shell and Python share one code path."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchharness.cli.options import add_data_options, result_store, results_root
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import non_negative_int, positive_float, positive_int
from benchharness.core.settings import load_config

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
    p.add_argument("--embedding-memory", type=positive_float, metavar="MIB",
                   help="an encoder's vectors larger than this (MiB) go to a file beside the cache and are read a "
                        "block at a time (default 4096)")
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
    from benchharness.evaluation.evaluate import evaluate

    task_names = tasks.resolve(args.tasks)
    if not task_names:
        raise InvalidInputError(f"--tasks {args.tasks!r} names no task; give a comma list of tasks or groups "
                                "(see `benchharness list tasks`)")
    encoder_names = [n.strip() for n in split_outside_parentheses(args.encoders, ",") if n.strip()]
    if not encoder_names:
        raise InvalidInputError(f"--encoders {args.encoders!r} names no encoder; give a comma list of names or specs "
                                "(see `benchharness list encoders`)")
    options = {"batch_size": args.batch_size, "device": args.device, "seed": args.seed, "data_dir": args.data_dir,
               "verify_data": not args.no_verify, "train": not args.no_train, "show_progress": not args.quiet,
               "log": print}
    if args.verify:
        return _verify(encoder_names, task_names, options, args)
    results_dir = results_root(args)
    cache_dir = None if args.no_cache else (Path(args.cache_dir) if args.cache_dir else load_config().cache_dir)
    results = evaluate(encoder_names, task_names, overwrite=args.overwrite, results_dir=results_dir,
                       cache_dir=cache_dir, add_items=args.add_items, **options,
                       **({} if args.embedding_memory is None else {"embedding_memory_mib": args.embedding_memory}))
    print(results.table())
    print(f"results in {Path(results_dir).absolute()}")
    return 1 if results.failed else 0


def _verify(encoder_names: list[str], task_names: list[str], options: dict, args: argparse.Namespace) -> int:
    """``run --verify``: encode and evaluate afresh, in memory (the embedding cache is bypassed, so
    the models really run), then compare each result with the stored one."""
    from tabulate import tabulate

    from benchharness.evaluation.evaluate import evaluate
    from benchharness.evaluation.verify import TOLERANCE, compare

    store = result_store(args)
    fresh = evaluate(encoder_names, task_names, overwrite="always", **options)
    checks = [compare(store.load(r.encoder, r.task), r) for r in fresh]
    rows = [[c.encoder, c.task, "" if c.stored is None else f"{c.stored:.2f}", f"{c.fresh:.2f}",
             "" if c.max_deviation is None else f"{c.max_deviation:.4f}", c.verdict] for c in checks]
    rows += [[o.encoder, o.task, "", "", "", f"failed: {o.message}"] for o in fresh.failed]
    print(tabulate(rows, headers=["encoder", "task", "stored", "fresh", "max |diff| (all metrics)", "verdict"],
                   tablefmt="github", disable_numparse=True))
    good = sum(c.ok for c in checks)
    print(f"{good} of {len(checks) + len(fresh.failed)} stored results reproduced within {TOLERANCE} (x100) "
          f"from {store.root}; nothing was written there")
    return 0 if good == len(checks) and not fresh.failed else 1
