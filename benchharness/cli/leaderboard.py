"""``benchharness leaderboard``: stored results beside the papers' published numbers, as Markdown,
CSV, booktabs LaTeX or HTML, filtered by encoder, task and row group."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from benchharness.core.results import ResultStore
    from benchharness.core.settings import Config
    from benchharness.reporting.board import ImportedModel

HELP = "leaderboard of stored results beside published numbers (md, csv, latex, html)"


def comma_list(text: str) -> list[str]:
    """The items of a comma list; commas inside brackets stay in their item (``mteb:MTEB(eng, v2)``)."""
    from benchharness.core.lists import bracketed_list

    try:
        return bracketed_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results-dir")
    p.add_argument(
        "--encoders",
        type=comma_list,
        help="comma list of encoder names or shell patterns ('minilm-*'); published rows are left out when given",
    )
    p.add_argument("--tasks", type=comma_list, help="comma list of tasks and task groups (sts, transfer, ...)")
    p.add_argument(
        "--groups",
        type=comma_list,
        help="comma list of row groups to show: base, post-processed, trained, published (default: all)",
    )
    p.add_argument("--no-published", action="store_true", help="leave out the papers' published rows")
    p.add_argument("--papers", help="comma list of papers whose published rows to show (default: all; 'none')")
    p.add_argument(
        "--published-dir",
        help="folder of published-number CSVs (default: the package's, benchharness/reporting/published)",
    )
    p.add_argument(
        "--format",
        default=None,
        choices=("md", "csv", "latex", "html"),
        help="output format (default: from the --output suffix, else md)",
    )
    p.add_argument(
        "--intervals",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the 95%% interval tables (default: on for md, csv and html, off for latex)",
    )
    p.add_argument("--output", "-o", help="write to this file instead of stdout")
    p.add_argument(
        "--mteb-results",
        action="append",
        default=[],
        metavar="FOLDER",
        help="an mteb results folder (mteb's results repository, or what `export mteb --out` wrote) whose models "
        "are shown as published rows beside the mteb tasks and benchmarks measured here (repeatable)",
    )


#: the output suffixes each format writes (a file without a suffix takes any format)
SUFFIXES = {"md": (".md", ".markdown", ".txt"), "csv": (".csv",), "latex": (".tex",), "html": (".html", ".htm")}


def output_format(fmt: str | None, output: str | None) -> str:
    """The format to write: ``--format``, else the one the ``--output`` suffix names, else md. A suffix
    the format cannot write (``lb.pdf``, ``--format csv -o lb.tex``) is refused before any work."""
    from benchharness.core.errors import InvalidInputError

    suffix = Path(output).suffix.lower() if output else ""
    if not suffix:
        return fmt or "md"
    named = [f for f, suffixes in SUFFIXES.items() if suffix in suffixes]
    if fmt is None and named:
        return named[0]
    if fmt is not None and fmt in named:
        return fmt
    writable = ", ".join(s for f in ([fmt] if fmt else SUFFIXES) for s in SUFFIXES[f])
    what = f"--format {fmt}" if fmt else "the leaderboard"
    raise InvalidInputError(f"--output {output}: {what} cannot be written as {suffix}; use one of {writable}")


def stored_results(args: argparse.Namespace) -> ResultStore:
    """The results folder the command reads, which must be there: a board of nothing would hide a
    mistyped --results-dir or a project where nothing has been run yet."""
    from benchharness.cli.options import result_store
    from benchharness.core.errors import InvalidInputError, MissingFileError

    store = result_store(args)
    if store.root.is_file():
        raise InvalidInputError(f"results folder {store.root} is a file, not a folder")
    if not store.root.is_dir():
        flag = f" --results-dir {store.root}" if getattr(args, "results_dir", None) else ""
        raise MissingFileError(
            f"no results folder {store.root}: fill it with `benchharness run --encoders NAMES --tasks TASKS{flag}`"
        )
    return store


def published_dir(args: argparse.Namespace) -> Path | Traversable:
    """``--published-dir`` (which must be a folder), else the package's published tables."""
    from benchharness.core.errors import MissingFileError
    from benchharness.reporting.leaderboard import PUBLISHED_DIR

    if not args.published_dir:
        return PUBLISHED_DIR
    if not Path(args.published_dir).is_dir():
        raise MissingFileError(f"--published-dir {args.published_dir}: no such folder")
    return Path(args.published_dir)


def results_label(root: Path) -> str:
    """The results folder as the header names it: relative to here when inside, never a machine path
    for the default."""
    try:
        return f"{root.resolve().relative_to(Path.cwd().resolve())}/"
    except ValueError:
        return f"{os.path.normpath(root)}/"


def task_selection(selection: list[str], stored: set[str], config: Config) -> tuple[set[str], list[str]]:
    """Task and group names expanded; a stored task no provider knows (an mteb or file task) as is;
    and the mteb benchmarks named (``mteb:MTEB(eng, v2)``), each to get its table."""
    from benchharness import tasks
    from benchharness.mteb_bridge.provider import PREFIX as MTEB_PREFIX

    out: set[str] = set()
    benchmarks: list[str] = []
    for item in selection:
        try:
            expanded = tasks.resolve(item, config)
        except tasks.UnknownTaskError:
            if item not in stored:
                raise
            expanded = [item]
        out.update(expanded)
        if item.startswith(MTEB_PREFIX) and expanded != [item]:
            from benchharness.mteb_bridge import selection as mteb_selection

            name = mteb_selection.parse(item).name
            if mteb_selection.is_benchmark(name):
                benchmarks.append(name)
    return out, benchmarks


def imported_models(folders: list[str]) -> list[ImportedModel]:
    """The models of every ``--mteb-results`` folder."""
    if not folders:
        return []
    from benchharness.mteb_bridge import mteb_needed

    with mteb_needed("--mteb-results"):
        from benchharness.mteb_bridge.published import read
    return [model for folder in folders for model in read(folder)]


def main(args: argparse.Namespace) -> int:
    from benchharness.cli.options import check_output
    from benchharness.reporting.leaderboard import build
    from benchharness.reporting.table_formats import render

    fmt = output_format(args.format, args.output)
    if args.output:
        check_output(args.output, "file", "--output")
    papers = None if not args.papers else (set() if args.papers == "none" else set(args.papers.split(",")))
    published = published_dir(args)
    store = stored_results(args)
    groups = set(args.groups) if args.groups else None
    if args.no_published:
        from benchharness.reporting.leaderboard import GROUPS

        groups = (groups or set(GROUPS)) - {"published"}
    tasks, benchmarks = (
        task_selection(args.tasks, {r.task for r in store}, args.configuration) if args.tasks else (None, [])
    )
    board = build(
        store,
        published,
        papers,
        encoders=args.encoders,
        tasks=tasks,
        groups=groups,
        results_label=results_label(store.root),
        config=args.configuration,
        imported=imported_models(args.mteb_results),
        benchmarks=benchmarks,
    )
    intervals = args.intervals if args.intervals is not None else fmt != "latex"
    text = render(board, fmt, intervals)
    if args.output:
        from benchharness.core.atomic import write_text

        write_text(args.output, text + "\n")
    else:
        print(text)
    return 0
