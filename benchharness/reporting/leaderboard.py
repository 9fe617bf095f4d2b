"""The leaderboard of stored results, with the papers' published numbers beside them, as a ``Board``
of tables (``build``) that ``reporting.table_formats`` prints as Markdown, CSV, LaTeX or HTML.

Each section is a table of encoders x tasks (+ Avg. when a row has every column, as the papers
average). The sections are those the installed tasks declare in their metadata
(``TaskMetadata.board``: a table, its columns, whether an average means anything; a task naming
none gets a table of its family's), so a task from a plugin is shown like a built-in one. Results of
mteb tasks run through the bridge (``mteb:<Name>``) get a section of their own, a column per task
present; the results of a task this process does not know keep a column, in the files' table
when their protocol says they came from a file task, else in a table of other tasks.
Measured rows come from ``results/<encoder>/<task>.json``; published rows from
the package's tables (``benchharness/reporting/published/*.csv``, package data, so an installed
wheel has them too) and are marked ``published`` with paper and table, so nobody mistakes
a number copied from a paper for one measured here.

Rows are grouped (the Source column): base encoders, post-processed (a ``+`` chain), trained (the
result records training provenance, or its model is a local checkpoint), then published; within a
group they are sorted by Avg. (sections without Avg.: by the mean of their cells), best first.
Trained runs of one recipe that differ only in their seed become one row, ``mean ±std`` with the
seeds listed (``aggregate_seeds``).

Uncertainty, without changing the score cells:

- ``†`` after a score: not significantly different (paired test on the two results' stored
  per-item outputs, p >= 0.05, no multiplicity correction) from the best measured score of its
  column; only for rows whose items are stored (``run --add-items``), never for published rows, and
  only where the test is defined on the two (not on different items, as two runs on a task file
  edited in between, nor against a perfect correlation, where Steiger's test divides by zero).
- below each table, the 95% bootstrap intervals stored in the results, compactly as ``lo–hi``
  (one decimal); the Avg. interval is the normal approximation from the tasks' intervals
  (independent tasks: half-width ``sqrt(sum h_i^2) / n``); ``compare`` gives the exact one. Where the
  Avg. is a group's mean declared a score of its own (NanoBEIR's) and every result keeps its items,
  it is that exact one: each task's items resampled within the task, the means averaged per resample.

Prompts: a row whose results were computed with prompts (``benchharness.core.prompts``; e5's
``query: `` / ``passage: ``) says so in its Source cell and lists them (``Line.prompts``), taken
from the very results the row shows: a score without the text its model was fed is not
reproducible, and an e5 scored without its prefixes is another number. Where the row's results
were computed with different prompts, each set is listed with its columns. A task's instruction
(``protocol["instruction"]``) is listed with the table (``Table.instructions``). Rows without
prompts and tasks without instructions show nothing of either.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import logging
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, cast

from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import PROMPT_KEYS
from benchharness.core.results import Result, ResultStore
from benchharness.core.settings import FILE_PROTOCOL_PREFIX
from benchharness.encoders.pipeline import reranks_misses
from benchharness.mteb_bridge.provider import PREFIX as MTEB_PREFIX
from benchharness.reporting.board import (
    GROUPS,
    ROW_GROUPS,
    Board,
    Cell,
    Column,
    ImportedModel,
    Instruction,
    Line,
    PromptNote,
    Section,
    Table,
    fmt,
    group_of,
    row_average,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.resources.abc import Traversable

    from benchharness.core.settings import Config
    from benchharness.core.task import BoardSection

logger = logging.getLogger(__name__)

#: the papers' numbers (see its README for sources): package data, read through importlib.resources so
#: that a wheel installed anywhere shows them as the checkout does; ``--published-dir`` overrides it
PUBLISHED_DIR: Traversable = files("benchharness.reporting") / "published"


#: the table of tasks with stored results that no installed task plugin knows (a plugin
#: uninstalled since, a Python task): a column each, its main score, no average
OTHER_TITLE = "Other tasks (not installed here; main score x100)"


def sections(results: list[Result], config: Config | None = None) -> list[Section]:
    """The board's tables, from the installed tasks' metadata (``TaskMetadata.board``, read as
    declared: no task's data is read), in the tables' order, columns in the catalogue's order;
    then a table of the mteb tasks with results, and the results of tasks this process does not
    know, under the table their results record (a task from files) or in ``OTHER_TITLE``."""
    from benchharness import tasks
    from benchharness.core.task import family_board
    from benchharness.tasks.boards import FILES

    placed: dict[BoardSection, list[Column]] = {}
    known: set[str] = set()
    catalogue = tasks.catalogue(config)
    means = [set(names) for names in catalogue.means.values()]
    for name, factory in catalogue.factories.items():
        try:
            meta = factory().declared  # type: ignore[operator]
        except Exception as exc:  # a plugin's broken task: its results are shown as unknown
            logger.debug("task %s gives no metadata (%s: %s)", name, type(exc).__name__, exc)
            continue
        known.add(name)
        if meta.on_board:
            placed.setdefault(meta.board or family_board(meta.family), []).extend(
                Column(c.header or name, name, c.metric, c.published) for c in meta.board_columns
            )
    unknown = sorted({r.task for r in results if r.task not in known and not r.task.startswith(MTEB_PREFIX)})
    from_files = [n for n in unknown if _variant(results, n).startswith(FILE_PROTOCOL_PREFIX)]
    if from_files:
        placed.setdefault(FILES, []).extend(Column(n, n) for n in from_files)
    out = [
        Section(board.title, tuple(columns), board.published_csv, board.average, {c.task for c in columns} in means)
        for board, columns in sorted(placed.items(), key=lambda item: item[0].order)
    ]
    mteb = sorted({r.task for r in results if r.task.startswith(MTEB_PREFIX)})
    if mteb:
        # mteb's main metric differs from task type to task type, hence no average
        title = "mteb tasks (mteb's own evaluation, main score x100)"
        out.append(Section(title, tuple(Column(n[len(MTEB_PREFIX) :], n) for n in mteb), None, average=False))
    if other := [n for n in unknown if n not in from_files]:
        out.append(Section(OTHER_TITLE, tuple(Column(n, n) for n in other), None, average=False))
    return out


def _variant(results: list[Result], task: str) -> str:
    return next(str(r.protocol.get("variant", "")) for r in results if r.task == task)


def _cell(result: Result | None, column: Column) -> float | None:
    if result is None:
        return None
    if column.metric is None:
        return result.main_score
    value = result.metrics.get(column.metric)
    return float(value) if value is not None else None


MARK = "†"
ALPHA = 0.05


def _recipe(result: Result) -> tuple[str, int] | None:
    """(recipe key, seed) for a trained result whose provenance records its seed. The key holds the
    result's prompts, if any: runs scored with different prompts differ in more than the seed."""
    training = result.encoder_metadata.get("training")
    if not isinstance(training, dict) or "seed" not in training.get("hyperparameters", {}):
        return None
    hyper = {k: v for k, v in training["hyperparameters"].items() if k != "seed"}
    key = {k: training.get(k) for k in ("method", "base_model", "base_weights_sha256", "data", "dev_task")}
    prompts = prompts_of(result)
    key = {**key, "hyperparameters": hyper, "task": result.task, **({"prompts": prompts} if prompts else {})}
    return json.dumps(key, sort_keys=True, default=str), int(training["hyperparameters"]["seed"])


def prompts_of(result: Result) -> dict[str, str]:
    """The prompts ``result`` was computed with, by spec key in ``PROMPT_KEYS`` order (``{}`` for
    none): those of its identity, which its identity hash covers, else its metadata's copy."""
    recorded = result.encoder_identity.get("prompts") or result.encoder_metadata.get("prompts") or {}
    if not isinstance(recorded, dict):
        return {}
    return {key: str(recorded[key]) for key in PROMPT_KEYS if recorded.get(key) is not None}


def prompt_text(prompts: dict[str, str]) -> list[str]:
    """Each prompt as ``key='text'`` (Python's quoting: trailing spaces, quotes and line breaks
    visible, always one line); every format escapes these further for itself."""
    return [f"{key}={text!r}" for key, text in prompts.items()]


def prompt_notes(columns: tuple[Column, ...], results: dict[str, Result]) -> tuple[PromptNote, ...]:
    """The prompts of a row's results, grouped by set; nothing for a row without any."""
    by_set: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for column in columns:
        if column.task in results:
            by_set.setdefault(tuple(prompts_of(results[column.task]).items()), []).append(column.header)
    if not any(by_set):
        return ()
    if len(by_set) == 1:
        return (PromptNote(next(iter(by_set))),)
    return tuple(PromptNote(prompts, tuple(headers)) for prompts, headers in by_set.items())


def instructions(section: Section, lines: list[Line]) -> list[Instruction]:
    """The task instructions (``protocol["instruction"]``) of the results shown in a table."""
    out = []
    for task in dict.fromkeys(c.task for c in section.columns):
        by_text: dict[str | None, list[str]] = {}
        for line in lines:
            if task in line.results:
                text = line.results[task].protocol.get("instruction")
                by_text.setdefault(None if text in (None, "") else str(text), []).append(line.encoder)
        if set(by_text) - {None}:
            several = len(by_text) > 1
            out += [Instruction(task, text, tuple(encoders) if several else ()) for text, encoders in by_text.items()]
    return out


@dataclass
class Row:
    encoder: str
    group: str
    results: dict[str, Result]  # by task; empty for published rows
    cells: list[float | None]
    average: float | None
    text: list[str] | None = None  # preformatted cells (seed aggregates, published rows)
    seeds: tuple[int, ...] = ()
    note: str | None = None  # the source note of a seed aggregate (its members' results are not kept)
    prompts: tuple[PromptNote, ...] = ()


def recipe_note(results: list[Result]) -> str:
    """The training recipe of a trained row (from its results' manifest): a trained row must say
    how to rebuild it, or that it cannot."""
    training = next((r.encoder_metadata["training"] for r in results if "training" in r.encoder_metadata), None)
    if training is None:
        # a trained result without training provenance names only its run folder, a machine's path
        local = any(str(r.encoder_identity.get("model", "")).startswith("/") for r in results)
        return "no recipe" if local else ""
    recipe = training.get("recipe")
    if recipe is None:
        return "no recipe"
    name = recipe.get("name") or f"recipe:{recipe['key']}"
    return f"recipe {name} ({recipe['key']})"


def _by_encoder(results: list[Result]) -> dict[str, dict[str, Result]]:
    by_encoder: dict[str, dict[str, Result]] = {}
    for r in results:
        by_encoder.setdefault(r.encoder, {})[r.task] = r
    return by_encoder


def aggregate_seeds(section: Section, rows: list[Row]) -> list[Row]:
    """Merge trained rows whose every result shares a recipe with the others' but for the seed:
    cells become ``mean ±std`` (sample std, ddof 1) over the seeds, which are listed."""
    keyed: dict[tuple[str, ...], list[tuple[int, Row]]] = {}
    rest = []
    for row in rows:
        recipes = [_recipe(row.results[c.task]) if c.task in row.results else None for c in section.columns]
        present = [r for r in recipes if r is not None]
        seeds = {seed for _, seed in present}
        if row.group != "trained" or not present or len(present) != len(row.results) or len(seeds) != 1:
            rest.append(row)
            continue
        keyed.setdefault(tuple(k for k, _ in present), []).append((seeds.pop(), row))
    for members in keyed.values():
        if len(members) == 1:
            rest.append(members[0][1])
            continue
        members.sort(key=lambda m: m[0])
        member_seeds = tuple(seed for seed, _ in members)
        text: list[str] = []
        means: list[float | None] = []
        for i in range(len(section.columns)):
            cells = [row.cells[i] for _, row in members]
            vals = [v for v in cells if v is not None]
            if len(vals) < len(cells):
                text.append("")
                means.append(None)
                continue
            mean = sum(vals) / len(vals)
            std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5
            text.append(f"{mean:.2f} ±{std:.2f}")
            means.append(mean)
        # named after a member that a recipe name stands for (`simcse`), not a derived `recipe:<key>`
        named = next((row for _, row in members if not row.encoder.startswith("recipe:")), members[0][1])
        others = ", ".join(row.encoder for _, row in members if row is not named)
        note = recipe_note(list(named.results.values()))
        note = f"{note}; other seeds: {others}" if note else f"other seeds: {others}"
        name = f"{named.encoder} (seeds {','.join(map(str, member_seeds))})"
        rest.append(Row(name, "trained", {}, means, row_average(means), text, member_seeds, note, named.prompts))
    return rest


def measured(section: Section, results: list[Result]) -> list[Row]:
    rows = []
    for encoder, by_task in sorted(_by_encoder(results).items()):
        cells = [_cell(by_task.get(c.task), c) for c in section.columns]
        if all(v is None for v in cells):
            continue
        group = group_of(next(iter(by_task.values())))
        shown = {c.task: by_task[c.task] for c in section.columns if c.task in by_task}
        rows.append(Row(encoder, group, shown, cells, row_average(cells), prompts=prompt_notes(section.columns, shown)))
    return aggregate_seeds(section, rows)


def _sort_key(row: Row, section: Section) -> tuple[float, str]:
    if section.average:
        value = row.average
    else:
        present = [v for v in row.cells if v is not None]
        value = sum(present) / len(present) if present else None
    return (-value if value is not None else float("inf"), row.encoder)


def marks(section: Section, rows: list[Row], store: ResultStore) -> tuple[set[tuple[str, int]], dict[str, str]]:
    """(encoder, column index) of the scores not significantly different from their column's best,
    and by encoder, a line on the columns where no test could be made, saying why and how to allow it."""
    out: set[tuple[str, int]] = set()
    missing: dict[str, list[str]] = {}  # encoder -> columns where its items were needed
    for i, column in enumerate(section.columns):
        scored = [r for r in rows if r.cells[i] is not None and column.task in r.results]
        if len(scored) < 2:
            continue
        best = max(scored, key=lambda r: cast(float, r.cells[i]))  # scored: cells[i] is not None
        best_result = best.results[column.task]
        if not store.has_items(best_result):
            missing.setdefault(best.encoder, []).append(column.header)
            continue
        from benchharness.scoring.confidence import column_test_p  # numpy and scipy: only when items are there

        best_items = store.load_items(best_result)
        for row in scored:
            result = row.results[column.task]
            if row is best:
                continue
            if not store.has_items(result):
                missing.setdefault(row.encoder, []).append(column.header)
                continue
            metric = column.metric or result.main_metric
            try:
                p = column_test_p(column.task, metric, best_items, store.load_items(result))
            except InvalidInputError:  # no test defined on these two (see the module docstring): no mark
                continue
            if p >= ALPHA:
                out.add((row.encoder, i))
    notes = {
        encoder: f"No paired test for {encoder} in {', '.join(columns)}: its results keep no per-item "
        f"outputs (`benchharness run --encoders '{encoder}' --tasks {section_tasks(section, columns)} "
        "--add-items`)."
        for encoder, columns in sorted(missing.items())
    }
    return out, notes


def section_tasks(section: Section, headers: list[str]) -> str:
    tasks = dict.fromkeys(c.task for c in section.columns if c.header in headers)
    return ",".join(tasks)


def _interval(result: Result | None, column: Column) -> tuple[float, float] | None:
    conf = (result.confidence or {}) if result is not None else {}
    if column.metric is None:
        main = conf.get("main")
        return (main[0], main[1]) if main else None
    iv = conf.get("intervals", {}).get(column.metric)
    return (iv["low"], iv["high"]) if iv else None


def ci_text(iv: tuple[float, float] | None) -> str:
    return "" if iv is None else f"{iv[0]:.1f}–{iv[1]:.1f}"


def _average_interval(row: Row, section: Section, store: ResultStore) -> tuple[float, float] | None:
    """The Avg.'s interval: for a declared group mean whose results keep their items, the bootstrap
    resampled within each task (``evaluation.means``); else the normal approximation from the
    columns' intervals."""
    results = [row.results[c.task] for c in section.columns if c.task in row.results]
    if section.resampled and len(results) == len(section.columns) and all(store.has_items(r) for r in results):
        from benchharness.evaluation.means import group_mean  # numpy: only where items are there

        mean = group_mean(section.title, [r.task for r in results], row.encoder, results, store.load_items)
        if mean.interval is not None:
            return mean.interval
    ivs = [_interval(row.results.get(c.task), c) for c in section.columns]
    if row.average is None or any(iv is None for iv in ivs):
        return None
    half = sum(((hi - lo) / 2) ** 2 for lo, hi in ivs) ** 0.5 / len(ivs)  # type: ignore[misc]
    return (row.average - half, row.average + half)


#: the Source cell's word for a row with prompts, listed with its table
PROMPTED = "with prompts"
#: the Source cell's words for a row scored under a pipeline's ``always_rerank_positives`` protocol
MISSES_RERANKED = "always_rerank_positives: the first stage's misses reranked too (sentence-transformers' protocol)"


def _measured_lines(section: Section, results: list[Result], store: ResultStore) -> tuple[list[Line], dict[str, str]]:
    rows = sorted(measured(section, results), key=lambda r: (GROUPS.index(r.group), *_sort_key(r, section)))
    marked, notes = marks(section, rows, store)
    lines = []
    for row in rows:
        cells = []
        for i, (column, value) in enumerate(zip(section.columns, row.cells)):
            text = row.text[i] if row.text is not None else fmt(value)
            interval = None if row.text is not None else _interval(row.results.get(column.task), column)
            cells.append(Cell(value, text, interval, (row.encoder, i) in marked))
        if section.average:
            avg = None if row.text is not None else _average_interval(row, section, store)
            cells.append(Cell(row.average, fmt(row.average), avg))
        note = (
            row.note
            if row.note is not None
            else (recipe_note(list(row.results.values())) if row.group == "trained" else "")
        )
        misses = any(reranks_misses(r.protocol) for r in row.results.values())
        note = "; ".join(n for n in (note, PROMPTED if row.prompts else "", MISSES_RERANKED if misses else "") if n)
        lines.append(
            Line(
                row.encoder,
                row.group,
                f"{row.group}; {note}" if note else row.group,
                cells,
                dict(row.results),
                row.prompts,
            )
        )
    return lines, notes


def _published_lines(section: Section, published_dir: Path | Traversable | None, papers: set[str] | None) -> list[Line]:
    if published_dir is None or section.published_csv is None or not (published_dir / section.published_csv).is_file():
        return []
    lines = []
    # binary, then text with newline="" as csv wants: a Traversable's open() takes no newline=
    with (published_dir / section.published_csv).open("rb") as raw, io.TextIOWrapper(raw, "utf-8", newline="") as fh:
        for rec in csv.DictReader(fh):
            if papers is not None and rec["paper"] not in papers:
                continue
            values = [_number(rec.get(c.published or "")) for c in section.columns]
            if all(v is None for v in values):
                continue
            if section.average:
                values.append(_number(rec.get("Avg")))
            lines.append(
                Line(
                    rec["model"],
                    "published",
                    f"published: {rec['paper']} {rec['table']}",
                    [Cell(v, fmt(v)) for v in values],
                    {},
                )
            )
    return lines


def _number(value: str | None) -> float | None:
    return float(value) if value not in (None, "") else None


def _mark_best(lines: list[Line]) -> None:
    for i in range(max((len(line.cells) for line in lines), default=0)):
        values = [v for line in lines if (v := line.cells[i].value) is not None]
        if values:
            top = max(values)
            for line in lines:
                line.cells[i].best = line.cells[i].value == top


def _select(section: Section, tasks: set[str] | None) -> Section | None:
    """The section with only the columns of ``tasks``; its average is kept only when every column
    is (the papers average over the whole suite)."""
    if tasks is None:
        return section
    columns = tuple(c for c in section.columns if c.task in tasks)
    if not columns:
        return None
    whole = columns == section.columns
    return Section(
        section.title, columns, section.published_csv, section.average and whole, section.resampled and whole
    )


def build(
    store: ResultStore,
    published_dir: Path | Traversable | None,
    papers: set[str] | None = None,
    *,
    encoders: list[str] | None = None,
    tasks: set[str] | None = None,
    groups: set[str] | None = None,
    results_label: str | None = None,
    config: Config | None = None,
    imported: Sequence[ImportedModel] = (),
    benchmarks: Sequence[str] = (),
) -> Board:
    """Every table of the leaderboard, filtered: ``encoders`` are names or shell patterns
    (``minilm-*``), ``tasks`` task names, ``groups`` row groups (``ROW_GROUPS``). ``published_dir``:
    the published tables (``PUBLISHED_DIR``, the package's), None for none; ``config``: the
    configuration whose tasks (``[tasks.*]``) are known besides the installed ones. ``imported``:
    models of mteb results folders, shown as published rows of the mteb columns; ``benchmarks``:
    mteb benchmarks to give a table each, besides those a row covers whole (``mteb_tables``)."""
    if groups is not None and (unknown := sorted(groups - set(ROW_GROUPS))):
        raise InvalidInputError(f"unknown row group(s) {', '.join(unknown)}; choose from {', '.join(ROW_GROUPS)}")
    results = [r for r in store if encoders is None or any(fnmatch.fnmatchcase(r.encoder, e) for e in encoders)]
    show_published = (groups is None or "published" in groups) and encoders is None
    from benchharness.reporting import mteb_tables  # it builds on this module's tables

    tables = []
    for full in sections(results, config):
        section = _select(full, tasks)
        if section is None:
            continue
        lines, notes = _measured_lines(section, results, store)
        lines = [line for line in lines if groups is None or line.group in groups]
        if show_published:
            lines += _published_lines(section, published_dir, papers)
        if imported and (groups is None or "published" in groups):
            lines += mteb_tables.imported_lines(section, imported)
        if not lines:
            continue
        _mark_best(lines)
        headers = [c.header for c in section.columns] + (["Avg."] if section.average else [])
        shown = {line.encoder for line in lines}
        variants = sorted(
            {
                f"{r.task}: {r.protocol.get('variant')}"
                for r in results
                if r.task in {c.task for c in section.columns} and r.encoder in shown
            }
        )
        tables.append(
            Table(
                section,
                headers,
                lines,
                [n for e, n in notes.items() if e in shown],
                variants,
                instructions(section, lines),
            )
        )
    if imported or benchmarks or any(r.task.startswith(MTEB_PREFIX) for r in results):
        tables += mteb_tables.benchmark_tables(results, imported, benchmarks, groups)
    source = (
        None
        if not show_published or published_dir is None
        else ("benchharness/reporting/published/" if published_dir is PUBLISHED_DIR else str(published_dir))
    )
    folders = tuple(dict.fromkeys(m.source for m in imported))
    return Board(tables, results_label or store.root.name + "/", source, folders)
