"""``benchharness tune <post-processor>``: a ``tuners`` plugin's grid search on a dev split.

A tuner declares its options (``tuning.grid.TuneOptions`` and its own fields), from which its flags
come as ``benchharness train``'s come from a method's; the flags of where and how it scores (device,
batch size, data root, cache) make the run settings it scores with."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from benchharness.cli.options import add_unavailable, raise_unavailable
from benchharness.core.flag_types import positive_int
from benchharness.core.plugins import PLUGINS

if TYPE_CHECKING:
    from benchharness.evaluation.run_settings import RunSettings

HELP = "tune a post-processor's parameters on a dev set and register the result"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from benchharness.cli.train import add_option
    from benchharness.training.options import declared

    sub = p.add_subparsers(dest="post", required=True)
    for name, tuner in PLUGINS.load_all("tuners").items():
        parser = sub.add_parser(name, help=tuner.HELP)
        group = parser.add_argument_group(name)
        for option, meta, default in declared(tuner.OPTIONS):
            add_option(group, option, meta, default)
        parser.add_argument("--device")
        parser.add_argument("--batch-size", type=positive_int)
        parser.add_argument("--data-dir")
        parser.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")
        parser.add_argument("--no-verify", action="store_true", help="do not check data files against pinned sha256")
    add_unavailable(sub, "tuners")


def settings_of(args: argparse.Namespace) -> RunSettings:
    """Where and how the grid is scored: configured like ``benchharness run`` (same cache, same defaults)."""
    from pathlib import Path

    from benchharness.evaluation.run_settings import RunSettings

    cfg = args.configuration
    return RunSettings(
        device=args.device,
        batch_size=args.batch_size,
        data_dir=Path(cfg.data_root(args.data_dir)),
        verify_data=not args.no_verify,
        cache_dir=None if args.no_cache else cfg.cache_dir,
        config=cfg,
    )


def main(args: argparse.Namespace) -> int:
    """Tune and print the tuner's output. The runs folder it registers the winner in is checked
    first, before the grid's work."""
    from benchharness.cli.options import check_output

    raise_unavailable(args)
    check_output(args.configuration.runs_dir, "folder", "the runs folder")
    tuner = PLUGINS.get("tuners", args.post)
    given: dict[str, Any] = {f.name: getattr(args, f.name) for f in fields(tuner.OPTIONS)}
    options = tuner.OPTIONS(**{k: v for k, v in given.items() if v is not None})
    print(tuner.tune(options, settings_of(args)))
    return 0
