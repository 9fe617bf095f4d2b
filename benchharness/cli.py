"""``benchharness``: list, run, leaderboard, compare, analyze, export, data, train, tune.

Training methods and tunable post-processors plug in through registries
(``encoders.methods.METHODS``, ``benchharness.tuning.TUNERS``): each entry supplies ``HELP``,
``add_arguments(parser)`` and ``main(args) -> int``, so new methods need no change here.

Start-up stays cheap: this module imports no torch, transformers or scikit-learn, and neither do
``list``, ``leaderboard``, ``data`` or ``--help`` (mteb, an optional extra, is imported only for
``mteb:`` tasks and ``export mteb``). The plugins of ``train`` and ``tune`` (training
methods import torch) are imported only when the command line names that command; the other
commands' help lists ``train`` and ``tune`` with their help line, as before.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection

from benchharness.config import apply_environment, load_config
from benchharness.flag_types import non_negative_int, positive_int

if TYPE_CHECKING:
    from benchharness.task import Task

#: command -> (plugin registry module, its attribute, the sub-command's dest, its help line)
PLUGIN_COMMANDS = {
    "train": ("encoders.methods", "METHODS", "method", "train an encoder with a method of the field"),
    "tune": ("benchharness.tuning", "TUNERS", "post",
             "tune a post-processor's parameters on a dev set and register the result"),
}


def _plugins(module: str, attr: str) -> dict[str, Any]:
    try:
        return getattr(importlib.import_module(module), attr, {})
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return {}
        raise


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="data root (default: $BENCHHARNESS_DATA, else benchharness.toml, else ./data)")
    p.add_argument("--results-dir", help="where result JSON files go (default: results/)")
    p.add_argument("--no-verify", action="store_true", help="do not check data files against pinned sha256")


def build_parser(plugins: Collection[str] = tuple(PLUGIN_COMMANDS)) -> argparse.ArgumentParser:
    """The full parser; the sub-commands of the ``plugins`` commands (``train``, ``tune``) are
    built only for those named, which imports their plugin modules."""
    parser = argparse.ArgumentParser(prog="benchharness", description=__doc__.splitlines()[0])
    from benchharness import __version__

    parser.add_argument("--version", action="version", version=f"benchharness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list encoders or tasks")
    p.add_argument("what", choices=["encoders", "tasks"])

    p = sub.add_parser("run", help="evaluate encoders on tasks and store one result per pair")
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
                   help="also recompute stored results that lack per-item outputs (kept since issue #15; "
                        "needed by `compare` and the leaderboard's marks); their scores do not change")
    p.add_argument("--no-train", action="store_true",
                   help="fail on a training recipe that has no run yet (printing the command that trains it) "
                        "instead of training it first")
    _common(p)

    p = sub.add_parser("leaderboard", help="Markdown table of stored results beside published numbers")
    p.add_argument("--results-dir")
    p.add_argument("--papers", help="comma list of papers whose published rows to show (default: all; 'none')")
    p.add_argument("--published-dir", help="folder of published-number CSVs (default: this checkout's results/published)")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")

    p = sub.add_parser("export", help="write stored results in another benchmark's results layout")
    p.add_argument("format", choices=["mteb"], help="mteb: <org__name>/<revision>/<Task>.json + model_meta.json, "
                   "loadable by mteb's ResultCache (results whose protocol is not an mteb task's are listed, not written)")
    p.add_argument("--out", required=True, help="folder to write into (mteb's own: $MTEB_CACHE/results)")
    p.add_argument("--encoders", help="comma list of encoder names (default: every stored encoder)")
    p.add_argument("--results-dir", help="where the stored result JSON files are (default: results/)")
    p = sub.add_parser("compare", help="paired comparison of two encoders' stored results (no encoding)")
    p.add_argument("a", help="encoder A (as named in results/)")
    p.add_argument("b", help="encoder B")
    p.add_argument("--tasks", required=True, help="comma list of tasks or groups (see `list tasks`)")
    p.add_argument("--results-dir")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap and permutation resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")

    p = sub.add_parser("analyze", help="alignment, uniformity, cosine per gold level, isotropy on STS-B (JSON + PNG)")
    p.add_argument("encoder", help="name or spec (see `list encoders`)")
    p.add_argument("--out", help="folder for analysis/<encoder>.json and figures/ (default: the results dir)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--cache-dir", help="embedding cache (default from benchharness.toml)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")
    _common(p)

    p = sub.add_parser("data", help="show or download evaluation data")
    p.add_argument("action", choices=["status", "download"])
    p.add_argument("datasets", nargs="*", help="for download: senteval glove askubuntu qqp nli nltk")
    _common(p)

    for command, (module, attr, dest, help_line) in PLUGIN_COMMANDS.items():
        p = sub.add_parser(command, help=help_line)
        if command in plugins:
            psub = p.add_subparsers(dest=dest, required=True)
            for name, plugin in _plugins(module, attr).items():
                sp = psub.add_parser(name, help=plugin.HELP)
                plugin.add_arguments(sp)
                if command == "train":  # the core's loop over seeds (benchharness.training_cli)
                    sp.add_argument("--seeds", help="comma list: train the recipe once per seed (each its own recipe key; with --out, in <out>-s<seed>)")
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    if args.what == "encoders":
        from benchharness.registry import FAMILIES, Registry

        rows = Registry().describe()
        print(tabulate([[r["name"], r["source"], r["description"], r["settings"]] for r in rows],
                       headers=["name", "source", "description", "settings"], tablefmt="github"))
        print(f"\nAd-hoc specs: {', '.join(f.usage for f in FAMILIES.values())}; "
              "compose post-processors with base+post(k=v,...).")
    else:
        import tasks  # the CLI is the composition root: it wires the task registry in

        groups = {t: g for g, names in tasks.GROUPS.items() for t in names}
        rows = []
        for name, factory in tasks.FACTORIES.items():
            m = factory().metadata
            rows.append([name, groups.get(name, ""), m.split, m.main_score, m.protocol, m.n_samples, m.description])
        print(tabulate(rows, headers=["task", "group", "split", "main score", "protocol", "n", "description"],
                       tablefmt="github"))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import tasks  # the CLI is the composition root: it wires the task registry in
    from benchharness.cache import CachingEncoder, EmbeddingCache
    from benchharness.data import DataRoot
    from benchharness.registry import Registry, split_outside_parentheses
    from benchharness.results import ResultStore
    from benchharness.runner import run

    cfg = load_config()
    task_names = tasks.resolve(args.tasks)
    if not task_names:
        raise ValueError(f"--tasks {args.tasks!r} names no task; give a comma list of tasks or groups "
                         "(see `benchharness list tasks`)")
    if args.device is not None:  # before any model loads: a typo or a missing GPU fails here
        from benchharness.devices import pick_device

        pick_device(args.device)
    data = DataRoot(args.data_dir, verify=not args.no_verify)
    cache = None if args.no_cache else EmbeddingCache(Path(args.cache_dir) if args.cache_dir else cfg.cache_dir)
    registry = Registry({"device": args.device, "batch_size": args.batch_size, "data_dir": data.root},
                        wrap=None if cache is None else (lambda enc: CachingEncoder(enc, cache)),
                        train_missing=not args.no_train, progress=not args.quiet)
    encoder_names = [n.strip() for n in split_outside_parentheses(args.encoders, ",") if n.strip()]
    if not encoder_names:
        raise ValueError(f"--encoders {args.encoders!r} names no encoder; give a comma list of names or specs "
                         "(see `benchharness list encoders`)")
    for name in encoder_names:  # fail fast on typos and missing folders, before any model is loaded
        registry.check(name)
    store = ResultStore(args.results_dir or cfg.results_dir)
    if args.verify:
        return _verify(encoder_names, task_names, registry, data, store, args)
    summary = run(encoder_names, task_names, registry.get, get_task, data, store, overwrite=args.overwrite,
                  seed=args.seed, show_progress=not args.quiet, add_items=args.add_items)
    from tabulate import tabulate

    print(tabulate([[o.encoder, o.task, o.status, "" if o.main_score is None else f"{o.main_score:.2f}", o.message]
                    for o in summary.outcomes], headers=["encoder", "task", "status", "main score", "note"],
                   tablefmt="github"))
    print(f"results in {store.root}")
    return 1 if summary.failed else 0


def _verify(encoder_names: list[str], task_names: list[str], registry: Any, data: Any, store: Any,
            args: argparse.Namespace) -> int:
    """``run --verify``: encode and evaluate afresh into a scratch store (the embedding cache is
    bypassed, so the models really run), then compare each result with the stored one."""
    import tempfile

    from tabulate import tabulate

    from benchharness.registry import Registry
    from benchharness.results import ResultStore
    from benchharness.runner import run
    from benchharness.verify import TOLERANCE, compare

    fresh_registry = Registry(registry.defaults)  # same defaults, no caching wrapper
    with tempfile.TemporaryDirectory(prefix="benchharness-verify-") as scratch:
        fresh_store = ResultStore(scratch)
        summary = run(encoder_names, task_names, fresh_registry.get, get_task, data, fresh_store, overwrite="always",
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


def get_task(name: str) -> Task:
    """A benchharness task by name, or an mteb task (``mteb:<Name>``) through the mteb bridge,
    imported only when such a name is asked for (mteb is an optional extra)."""
    import tasks

    if not name.startswith(tasks.MTEB_PREFIX):
        return tasks.get(name)
    from benchharness.mteb_bridge import load

    try:
        return load("task", f"task {name}").MtebTask(name)
    except KeyError as exc:  # mteb does not know the name; its message lists close ones
        raise tasks.UnknownTaskError(exc.args[0] if exc.args else name) from None


def cmd_export(args: argparse.Namespace) -> int:
    from benchharness.mteb_bridge import load
    from benchharness.results import ResultStore

    export = load("export", "benchharness export mteb")
    cfg = load_config()
    store = ResultStore(args.results_dir or cfg.results_dir)
    wanted = None if not args.encoders else {n.strip() for n in args.encoders.split(",") if n.strip()}
    results = [r for r in store if wanted is None or r.encoder in wanted]
    if wanted is not None and wanted - {r.encoder for r in results}:
        raise ValueError(f"no stored results under {store.root} for encoder(s) "
                         f"{', '.join(sorted(wanted - {r.encoder for r in results}))}")
    report = export.export_results(results, args.out)
    print("\n".join(report.lines()))
    print(f"{len(report.exported)} result(s) exported to {args.out}, {len(report.skipped)} not exported")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from benchharness.leaderboard import render
    from benchharness.results import ResultStore

    cfg = load_config()
    root = Path(args.results_dir) if args.results_dir else cfg.results_dir
    papers = None if not args.papers else (set() if args.papers == "none" else set(args.papers.split(",")))
    from benchharness.leaderboard import PUBLISHED_DIR

    published = Path(args.published_dir) if args.published_dir else PUBLISHED_DIR
    text = render(ResultStore(root), published, papers)
    if args.output:
        from benchharness.atomic import write_text

        write_text(args.output, text + "\n")
    else:
        print(text)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import tasks  # the CLI is the composition root: it wires the task registry in
    from benchharness.compare import compare, render
    from benchharness.results import ResultStore

    root = Path(args.results_dir) if args.results_dir else load_config().results_dir
    rows = compare(ResultStore(root), args.a, args.b, tasks.resolve(args.tasks), args.resamples, args.seed)
    print(render(rows, args.a, args.b))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    import tasks  # the CLI is the composition root: it wires the task registry in
    from benchharness.analysis_report import analyze
    from benchharness.cache import CachingEncoder, EmbeddingCache
    from benchharness.data import DataRoot
    from benchharness.registry import Registry

    cfg = load_config()
    data = DataRoot(args.data_dir, verify=not args.no_verify)
    cache = None if args.no_cache else EmbeddingCache(Path(args.cache_dir) if args.cache_dir else cfg.cache_dir)
    registry = Registry({"device": args.device, "batch_size": args.batch_size, "data_dir": data.root},
                        wrap=None if cache is None else (lambda enc: CachingEncoder(enc, cache)))
    task = tasks.get("STSBenchmark")
    task.load(data)
    first, second, gold = task.subsets["test"]
    out = Path(args.out) if args.out else (Path(args.results_dir) if args.results_dir else cfg.results_dir)
    report = analyze(registry.get(args.encoder), args.encoder, first, second, gold, out)
    iso = report["isotropy"]
    print(f"{args.encoder}: alignment {report['alignment']:.4f}, uniformity {report['uniformity']:.4f}, "
          f"mean random-pair cosine {iso['mean_random_pair_cosine']:.4f}, top-1 PC variance share "
          f"{iso['top1_pc_variance_share']:.4f}")
    for level in report["cosine_by_gold_level"]:
        print(f"  gold {level['level']}: n={level['n']}, mean cosine {level['mean']:.4f}, var {level['var']:.4f}")
    print(f"written: {out / 'analysis'} and {', '.join(report['figures'])}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from benchharness.data import SOURCES, DataRoot, download

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


def main(argv: list[str] | None = None) -> int:
    try:
        apply_environment(load_config())  # a broken benchharness.toml is a user error too
    except ValueError as exc:
        print(f"benchharness: error: {exc}", file=sys.stderr)
        return 2
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(plugins={command} & set(PLUGIN_COMMANDS)).parse_args(argv)
    handlers = {"list": cmd_list, "run": cmd_run, "leaderboard": cmd_leaderboard, "data": cmd_data,
                "export": cmd_export, "compare": cmd_compare, "analyze": cmd_analyze}
    try:
        if args.command in handlers:
            return handlers[args.command](args)
        if args.command == "train":  # the core hands the method its STS-B dev evaluator
            from benchharness.training_cli import main as train

            return train(args)
        module, attr, dest, _ = PLUGIN_COMMANDS[args.command]
        return _plugins(module, attr)[getattr(args, dest)].main(args)
    except Exception as exc:
        if not isinstance(exc, _user_errors()):
            raise
        print(f"benchharness: error: {exc}", file=sys.stderr)
        return 2


def _user_errors() -> tuple[type[Exception], ...]:
    """Errors that are the user's to fix, reported in one line with exit status 2. Imported when
    something was raised, so that commands which need neither the registry nor the tasks do not
    import them."""
    from benchharness.data import DataError
    from benchharness.mteb_bridge import MtebNotInstalledError
    from benchharness.registry import UnknownEncoderError
    from tasks import UnknownTaskError  # the CLI is the composition root: task-name errors end here

    # OSError subclasses that name a path the user gave; FloatingPointError: a diverged training loss
    return (UnknownEncoderError, UnknownTaskError, DataError, FileNotFoundError, ValueError, PermissionError,
            NotADirectoryError, IsADirectoryError, FileExistsError, FloatingPointError,
            MtebNotInstalledError)


if __name__ == "__main__":
    sys.exit(main())
