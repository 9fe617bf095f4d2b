"""``benchharness``: list, run, leaderboard, data, train, tune.

Training methods and tunable post-processors plug in through registries
(``encoders.methods.METHODS``, ``encoders.postprocess.TUNERS``): each entry supplies
``add_arguments(parser)`` and ``main(args) -> int``, so new methods need no change here.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from benchharness.config import apply_environment, load_config


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


def build_parser() -> argparse.ArgumentParser:
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
    p.add_argument("--no-train", action="store_true",
                   help="fail on a training recipe that has no run yet (printing the command that trains it) "
                        "instead of training it first")
    _common(p)

    p = sub.add_parser("leaderboard", help="Markdown table of stored results beside published numbers")
    p.add_argument("--results-dir")
    p.add_argument("--papers", help="comma list of papers whose published rows to show (default: all; 'none')")
    p.add_argument("--published-dir", help="folder of published-number CSVs (default: this checkout's results/published)")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")

    p = sub.add_parser("data", help="show or download evaluation data")
    p.add_argument("action", choices=["status", "download"])
    p.add_argument("datasets", nargs="*", help="for download: senteval glove askubuntu qqp nli nltk")
    _common(p)

    methods = _plugins("encoders.methods", "METHODS")
    p = sub.add_parser("train", help="train an encoder with a method of the field")
    msub = p.add_subparsers(dest="method", required=True)
    for name, method in methods.items():
        mp = msub.add_parser(name, help=method.HELP)
        method.add_arguments(mp)

    tuners = _plugins("encoders.postprocess", "TUNERS")
    p = sub.add_parser("tune", help="tune a post-processor's parameters on a dev set and register the result")
    tsub = p.add_subparsers(dest="post", required=True)
    for name, tuner in tuners.items():
        tp = tsub.add_parser(name, help=tuner.HELP)
        tuner.add_arguments(tp)
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    if args.what == "encoders":
        from benchharness.registry import Registry

        rows = Registry().describe()
        print(tabulate([[r["name"], r["source"], r["description"], r["settings"]] for r in rows],
                       headers=["name", "source", "description", "settings"], tablefmt="github"))
        print("\nAd-hoc specs: hf:<model>?pooling=cls|cls_before_pooler|avg|avg_top2|avg_first_last|prompt"
              "&first_layer=0|1&max_length=N&precision=fp32|fp16|bf16, st:<model>, glove:<file>; "
              "compose post-processors with base+post(k=v,...).")
    else:
        import tasks

        groups = {t: g for g, names in tasks.GROUPS.items() for t in names}
        rows = []
        for name, factory in tasks.FACTORIES.items():
            m = factory().metadata
            rows.append([name, groups.get(name, ""), m.split, m.main_score, m.protocol, m.n_samples, m.description])
        print(tabulate(rows, headers=["task", "group", "split", "main score", "protocol", "n", "description"],
                       tablefmt="github"))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import tasks
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
                        wrap=None if cache is None else (lambda enc: CachingEncoder(enc, cache)),
                        train_missing=not args.no_train, progress=not args.quiet)
    encoder_names = [n.strip() for n in split_outside_parentheses(args.encoders, ",") if n.strip()]
    for name in encoder_names:  # fail fast on typos, before any model is loaded
        for part in split_composition(name)[:1]:
            registry.spec_for(part)
    store = ResultStore(args.results_dir or cfg.results_dir)
    summary = run(encoder_names, task_names, registry.get, data, store, overwrite=args.overwrite,
                  seed=args.seed, show_progress=not args.quiet)
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
        Path(args.output).write_text(text + "\n")
    else:
        print(text)
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
    args = build_parser().parse_args(argv)
    from benchharness.data import DataError
    from benchharness.registry import UnknownEncoderError
    from tasks import UnknownTaskError

    handlers = {"list": cmd_list, "run": cmd_run, "leaderboard": cmd_leaderboard, "data": cmd_data}
    try:
        if args.command in handlers:
            return handlers[args.command](args)
        if args.command == "train":
            from benchharness.training_cli import main as train

            return train(args)
        return _plugins("encoders.postprocess", "TUNERS")[args.post].main(args)
    except (UnknownEncoderError, UnknownTaskError, DataError, FileNotFoundError, ValueError) as exc:
        print(f"benchharness: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
