"""Flags and objects several commands share: the data, results and cache folders, and the resolver
of encoder names with the embedding cache wrapped around it. Every command module imports this one
to build the parser, so what the objects need is imported when they are built."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchharness.core.data_root import DataRoot
    from benchharness.core.results import ResultStore
    from benchharness.evaluation.resolver import Resolver


def add_data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="data root (default: $BENCHHARNESS_DATA, else benchharness.toml, else ./data)")
    p.add_argument("--results-dir", help="where result JSON files go (default: results/)")
    p.add_argument("--no-verify", action="store_true", help="do not check data files against pinned sha256")


def add_encoding_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--cache-dir", help="embedding cache (default from benchharness.toml)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")


def add_unavailable(sub: argparse._SubParsersAction, kind: str) -> None:
    """A sub-command for each ``kind`` plugin that failed to load, so that naming it gives its load
    error in one line (raised by ``raise_unavailable``) instead of argparse's list of choices."""
    from benchharness.core.plugins import PLUGINS

    for name, error in PLUGINS.broken(kind).items():
        # every word after the name is taken as it is (no prefix character: "--base" is a word here)
        sp = sub.add_parser(name, help=f"unavailable: {error}", prefix_chars="\0", add_help=False)
        sp.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
        sp.set_defaults(unavailable=error)


def raise_unavailable(args: argparse.Namespace) -> None:
    """The load error of the plugin ``args`` names, if it is one that failed (``add_unavailable``)."""
    error = getattr(args, "unavailable", None)
    if error is not None:
        raise error


def check_output(path: str | Path, kind: str, flag: str) -> Path:
    """``path`` as a place this command can write a ``kind`` ("file" or "folder") into, checked before
    any work starts (a model loaded, a sentence encoded); else one line naming ``flag`` (the option,
    or what the path is) and the problem. Nothing is created: a path that does not exist yet passes
    when its nearest existing parent is a folder this process can write in."""
    from benchharness.core.errors import InvalidInputError

    path = Path(path).expanduser()
    if path.exists():
        if kind == "folder" and not path.is_dir():
            raise InvalidInputError(f"{flag} {path} is a file; give a folder")
        if kind == "file" and path.is_dir():
            raise InvalidInputError(f"{flag} {path} is a folder; give a file name")
    # a file is written as a sibling renamed over it (core.atomic): its folder must take new files
    folder = path if kind == "folder" and path.exists() else path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise InvalidInputError(f"{flag} {path}: {folder} is a file, not a folder")
    problem = _unwritable(folder)
    if problem is not None:
        where = "not writable" if folder == path else f"cannot write it, {folder} is not writable"
        raise InvalidInputError(f"{flag} {path}: {where} ({problem})")
    return path


def _unwritable(folder: Path) -> str | None:
    """Why no file can be created in ``folder``, or None. Tried, not inferred from permission bits:
    root passes every ``os.access`` check, yet cannot write in /proc or on a read-only mount. The
    probe is an unnamed file (O_TMPFILE where the system has it), removed on close."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def results_root(args: argparse.Namespace) -> Path:
    return Path(args.results_dir) if getattr(args, "results_dir", None) else args.configuration.results_dir


def result_store(args: argparse.Namespace) -> ResultStore:
    from benchharness.core.results import ResultStore

    return ResultStore(results_root(args), configured=args.configuration.results_dir)


def data_root(args: argparse.Namespace) -> DataRoot:
    from benchharness.core.data_root import DataRoot

    return DataRoot(args.configuration.data_root(args.data_dir), verify=not args.no_verify)


def resolver(args: argparse.Namespace, data: DataRoot, train_missing: bool = True) -> Resolver:
    """The resolver of encoder names with the flags' defaults, the embedding cache wrapped around
    every encoder it builds that the cache keeps (``run_resolver.caching``: not the stages whose
    rows are recomputed, such as a task-calibrated ``+quantize``) unless ``--no-cache``."""
    from benchharness.evaluation.cache import EmbeddingCache
    from benchharness.evaluation.resolver import Resolver
    from benchharness.evaluation.run_resolver import caching
    from benchharness.evaluation.run_settings import RunSettings

    folder = Path(args.cache_dir) if args.cache_dir else args.configuration.cache_dir
    cache = None if args.no_cache else EmbeddingCache(folder)
    settings = RunSettings(
        device=args.device,
        batch_size=args.batch_size,
        data_dir=data.root,
        train=train_missing,
        config=args.configuration,
    )
    return Resolver(wrap=None if cache is None else caching(cache), settings=settings)
