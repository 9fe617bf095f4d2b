"""``benchharness run``: evaluate encoders on tasks and store one result per pair (or, with
``--verify``, check that a fresh computation reproduces the stored results). A thin layer over
``benchharness.evaluate``: the shell and Python share one code path; ``--executor ray`` hands the
same runner to Ray workers (``benchharness.evaluation.sweep``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from benchharness.cli.messages import bars_shown
from benchharness.cli.options import add_data_options, check_output, result_store, results_root
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import non_negative_int, positive_float, positive_int

if TYPE_CHECKING:
    from benchharness.core.task import Task
    from benchharness.evaluation.results import Results
    from benchharness.evaluation.run_settings import RunSettings

HELP = "evaluate encoders on tasks and store one result per pair"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encoders", required=True, help="comma list of names/specs (see `list encoders`)")
    p.add_argument("--tasks", required=True, help="comma list of tasks or groups (see `list tasks`)")
    p.add_argument(
        "--overwrite",
        choices=["reuse", "stale", "always"],
        default="reuse",
        help="reuse stored results of the same encoder identity (default: one of another identity is "
        "recomputed), also recompute those whose data or protocol changed (stale), or recompute all",
    )
    p.add_argument("--seed", type=non_negative_int, default=1111)
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--cache-dir", help="embedding cache (default from benchharness.toml)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")
    p.add_argument(
        "--embedding-memory",
        type=positive_float,
        metavar="MIB",
        help="an encoder's vectors larger than this (MiB) go to a file beside the cache and are read a "
        "block at a time (default 4096)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="recompute everything from scratch (no cache, nothing stored) and check that it reproduces "
        "the stored results within the regression tolerance; exit 1 if not",
    )
    p.add_argument(
        "--add-items",
        action="store_true",
        help="also recompute stored results that lack per-item outputs (needed by `compare` and the "
        "leaderboard's marks); their scores do not change",
    )
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: one encoder after another in this process (default); ray: each base encoder's pass "
        "as a Ray task (needs the 'distributed' extra), results written here",
    )
    p.add_argument(
        "--address", help="with --executor ray or --encode-actors: the Ray cluster to join (default: start a local one)"
    )
    p.add_argument(
        "--encode-actors",
        type=positive_int,
        metavar="N",
        help="encode what the embedding cache lacks with N Ray actors (one per GPU or CPU slot); this "
        "process stays the cache's only writer",
    )
    p.add_argument(
        "--no-train",
        action="store_true",
        help="fail on a training recipe that has no run yet (printing the command that trains it) "
        "instead of training it first",
    )
    add_data_options(p)


def settings_from(args: argparse.Namespace) -> RunSettings:
    """The run's one settings value, from its flags (checked here, before any model loads)."""
    from benchharness.evaluation.run_settings import DEFAULT_MEMORY_MIB, RunSettings

    distributed = args.executor == "ray" or args.encode_actors
    if args.verify and distributed:
        raise InvalidInputError("--verify recomputes in this process; leave out --executor ray and --encode-actors")
    if args.address and not distributed:
        raise InvalidInputError("--address names a Ray cluster for --executor ray or --encode-actors; give one of them")
    if args.executor == "ray" and args.encode_actors:
        raise InvalidInputError(
            "--executor ray already spreads the encoders over the cluster; --encode-actors spreads "
            "one encoder's sentences: choose one"
        )
    if args.encode_actors and args.no_cache:
        raise InvalidInputError("--encode-actors fills the embedding cache; leave out --no-cache")
    results_dir = None if args.verify else check_output(results_root(args), "folder", "--results-dir")
    cache_dir = (
        None
        if args.no_cache or args.verify
        else (Path(args.cache_dir) if args.cache_dir else args.configuration.cache_dir)
    )
    return RunSettings(
        device=args.device,
        batch_size=args.batch_size,
        seed=args.seed,
        overwrite="always" if args.verify else args.overwrite,
        results_dir=results_dir,
        cache_dir=cache_dir,
        data_dir=args.data_dir,
        verify_data=not args.no_verify,
        train=not args.no_train,
        add_items=args.add_items,
        show_progress=bars_shown(args.quiet),
        embedding_memory_mib=args.embedding_memory or DEFAULT_MEMORY_MIB,
        encode_actors=args.encode_actors or 0,
        ray_address=args.address,
        config=args.configuration,
    )


def main(args: argparse.Namespace) -> int:
    from benchharness.core.specs import encoder_list
    from benchharness.evaluation.evaluate import evaluate_with, resolve_tasks

    encoder_names = encoder_list(args.encoders)
    if not encoder_names:
        raise InvalidInputError(
            f"--encoders {args.encoders!r} names no encoder; give a comma list of names or specs "
            "(see `benchharness list encoders`)"
        )
    if not args.tasks.strip(" ,"):
        raise InvalidInputError(
            f"--tasks {args.tasks!r} names no task; give a comma list of tasks or groups "
            "(see `benchharness list tasks`)"
        )
    settings = settings_from(args)
    selected = resolve_tasks(args.tasks, settings.config)
    if args.verify:
        return _verify(encoder_names, selected, settings, args)
    if args.executor == "ray":
        results = _sweep(encoder_names, selected, settings)
    else:
        results = evaluate_with(settings, encoder_names, selected, errors="keep")  # failures are rows of the table
    assert settings.results_dir is not None  # None only for --verify, answered above
    _report(results, settings.results_dir)
    return 1 if results.failed else 0


def _report(results: Results, folder: Path) -> None:
    """The table of what became of each pair, then where the results are, or that none was stored.
    Failures the log told in one line (a benchmark's datasets missing offline) are that line, not
    one row each."""
    from benchharness.evaluation.results import Results

    rows = [o for o in results.outcomes if not o.told_together]
    if rows:
        print(Results(results.results, rows, store=results.store).table())  # the store: a group mean's items
    if any(o.saved or o.status == "reused" for o in results.outcomes):
        print(f"results in {folder.absolute()}")
    else:
        computed = sum(o.status == "computed" for o in results.outcomes)
        why = [f"{len(results.failed)} of {len(results.outcomes)} evaluations failed"] if results.failed else []
        why += [f"{computed} computed but not stored (their notes say why)"] if computed else []
        print(f"nothing stored in {folder.absolute()}: {'; '.join(why)}")


def _sweep(encoder_names: list[str], selected: list[Task], settings: RunSettings) -> Results:
    """``--executor ray``: the names checked here, before any worker starts, then the sweep."""
    from benchharness.evaluation.run_resolver import resolver_for
    from benchharness.evaluation.sweep import sweep

    data = settings.data(verify=False)
    resolver = resolver_for(settings, data)
    for name in encoder_names:
        resolver.check(name)
    absolute = {
        key: None if getattr(settings, key) is None else getattr(settings, key).absolute()
        for key in ("results_dir", "cache_dir")
    }
    return sweep(encoder_names, selected, settings.but(data_dir=data.root.absolute(), **absolute))


def _verify(encoder_names: list[str], selected: list[Task], settings: RunSettings, args: argparse.Namespace) -> int:
    """``run --verify``: encode and evaluate afresh, in memory (no embedding cache, so the models
    really run, and nothing stored), then compare each result with the stored one."""
    from tabulate import tabulate

    from benchharness.evaluation.evaluate import evaluate_with
    from benchharness.evaluation.verify import TOLERANCE, compare

    store = result_store(args)
    fresh = evaluate_with(settings, encoder_names, selected, errors="keep")
    checks = [compare(store.load(r.encoder, r.task), r) for r in fresh]
    rows = [
        [
            c.encoder,
            c.task,
            "" if c.stored is None else f"{c.stored:.2f}",
            f"{c.fresh:.2f}",
            "" if c.max_deviation is None else f"{c.max_deviation:.4f}",
            c.verdict,
        ]
        for c in checks
    ]
    rows += [[o.encoder, o.task, "", "", "", f"failed: {o.message}"] for o in fresh.failed]
    print(
        tabulate(
            rows,
            headers=["encoder", "task", "stored", "fresh", "max |diff| (all metrics)", "verdict"],
            tablefmt="github",
            disable_numparse=True,
        )
    )
    good = sum(c.ok for c in checks)
    print(
        f"{good} of {len(checks) + len(fresh.failed)} stored results reproduced within {TOLERANCE} (x100) "
        f"from {store.root}; nothing was written there"
    )
    return 0 if good == len(checks) and not fresh.failed else 1
