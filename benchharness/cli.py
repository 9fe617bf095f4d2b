"""``benchharness``: list, run, leaderboard, compare, analyze, data, train, tune.

Training methods and tunable post-processors plug in through registries
(``encoders.methods.METHODS``, ``benchharness.tuning.TUNERS``): each entry supplies ``HELP``,
``add_arguments(parser)`` and ``main(args) -> int``, so new methods need no change here.

Start-up stays cheap: this module imports no torch, transformers or scikit-learn, and neither do
``list``, ``leaderboard``, ``data`` or ``--help``. The plugins of ``train`` and ``tune`` (training
methods import torch) are imported only when the command line names that command; the other
commands' help lists ``train`` and ``tune`` with their help line, as before.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any, Collection

from benchharness.config import apply_environment, load_config

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
    p.add_argument("--seed", type=int, default=1111)
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--cache-dir", help="embedding cache (default from benchharness.toml)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--add-items", action="store_true",
                   help="also recompute stored results that lack per-item outputs (kept since issue #15; "
                        "needed by `compare` and the leaderboard's marks); their scores do not change")
    _common(p)

    p = sub.add_parser("leaderboard", help="Markdown table of stored results beside published numbers")
    p.add_argument("--results-dir")
    p.add_argument("--papers", help="comma list of papers whose published rows to show (default: all; 'none')")
    p.add_argument("--published-dir", help="folder of published-number CSVs (default: this checkout's results/published)")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")

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
                    sp.add_argument("--seeds", help="comma list: train once per seed, each in <out>-s<seed>")
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
    from benchharness.registry import Registry, split_composition, split_outside_parentheses
    from benchharness.results import ResultStore
    from benchharness.runner import run

    cfg = load_config()
    task_names = tasks.resolve(args.tasks)
    data = DataRoot(args.data_dir, verify=not args.no_verify)
    cache = None if args.no_cache else EmbeddingCache(Path(args.cache_dir) if args.cache_dir else cfg.cache_dir)
    registry = Registry({"device": args.device, "batch_size": args.batch_size, "data_dir": data.root},
                        wrap=None if cache is None else (lambda enc: CachingEncoder(enc, cache)))
    encoder_names = [n.strip() for n in split_outside_parentheses(args.encoders, ",") if n.strip()]
    for name in encoder_names:  # fail fast on typos, before any model is loaded
        for part in split_composition(name)[:1]:
            registry.spec_for(part)
    store = ResultStore(args.results_dir or cfg.results_dir)
    summary = run(encoder_names, task_names, registry.get, tasks.get, data, store, overwrite=args.overwrite,
                  seed=args.seed, show_progress=not args.quiet, add_items=args.add_items)
    from tabulate import tabulate

    print(tabulate([[o.encoder, o.task, o.status, "" if o.main_score is None else f"{o.main_score:.2f}", o.message]
                    for o in summary.outcomes], headers=["encoder", "task", "status", "main score", "note"],
                   tablefmt="github"))
    print(f"results in {store.root}")
    return 1 if summary.failed else 0


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
    apply_environment(load_config())
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(plugins={command} & set(PLUGIN_COMMANDS)).parse_args(argv)
    handlers = {"list": cmd_list, "run": cmd_run, "leaderboard": cmd_leaderboard, "data": cmd_data,
                "compare": cmd_compare, "analyze": cmd_analyze}
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
    from benchharness.registry import UnknownEncoderError
    from tasks import UnknownTaskError  # the CLI is the composition root: task-name errors end here

    return (UnknownEncoderError, UnknownTaskError, DataError, FileNotFoundError, ValueError)


if __name__ == "__main__":
    sys.exit(main())
