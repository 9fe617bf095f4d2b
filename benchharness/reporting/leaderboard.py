"""Markdown leaderboard from stored results, with the papers' published numbers beside them.

Each section is a table of encoders x tasks (+ Avg. when a row has every column, as the papers
average). Measured rows come from ``results/<encoder>/<task>.json``; published rows from
``results/published/*.csv`` and are marked ``published`` with paper and table, so nobody mistakes
a number copied from a paper for one measured here. Results of mteb tasks run through the bridge
(``mteb:<Name>``) get a section of their own, a column per task present, and so do the results of
tasks declared from files (``benchharness.tasks.from_files``), which no built-in section knows.

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
  (independent tasks: half-width ``sqrt(sum h_i^2) / n``); ``compare`` gives the exact one.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from benchharness.core.checkout import CHECKOUT
from benchharness.core.errors import InvalidInputError
from benchharness.core.results import Result, ResultStore
from benchharness.mteb_bridge.provider import PREFIX as MTEB_PREFIX

#: the papers' numbers, kept with the stored results of this checkout (see its README for sources)
#: the published tables of this checkout (None when installed from a wheel: pass ``--published-dir``)
PUBLISHED_DIR = None if CHECKOUT is None else CHECKOUT / "results" / "published"


@dataclass(frozen=True)
class Column:
    header: str
    task: str
    metric: str | None = None  # None: the task's main score
    published: str | None = None  # column name in the published CSV


@dataclass(frozen=True)
class Section:
    title: str
    columns: tuple[Column, ...]
    published_csv: str | None
    average: bool = True


SECTIONS = (
    Section(
        "STS (Spearman x100; STS12-16 'all' aggregation)",
        tuple(Column(h, t, None, p) for h, t, p in (
            ("STS12", "STS12", "STS12"), ("STS13", "STS13", "STS13"), ("STS14", "STS14", "STS14"),
            ("STS15", "STS15", "STS15"), ("STS16", "STS16", "STS16"), ("STS-B", "STSBenchmark", "STSB"),
            ("SICK-R", "SICKRelatedness", "SICKR"))),
        "sts.csv",
    ),
    Section(
        "SentEval transfer (test accuracy %)",
        tuple(Column(t, t, None, t) for t in ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")),
        "transfer.csv",
    ),
    Section(
        "Retrieval and reranking (x100)",
        (Column("QQP MAP", "QQP", "map", "QQP_MAP"), Column("QQP MRR@10", "QQP", "mrr@10", "QQP_MRR10"),
         Column("AskUbuntu MAP", "AskUbuntu", "map", "AskUbuntu_MAP"),
         Column("AskUbuntu MRR@10", "AskUbuntu", "mrr@10", "AskUbuntu_MRR10")),
        "ranking.csv",
        average=False,
    ),
)


def mteb_section(results: list[Result]) -> Section | None:
    """One column per mteb task that has a stored result, main score x100 (mteb's main metric,
    which differs from task type to task type, hence no average)."""
    names = sorted({r.task for r in results if r.task.startswith(MTEB_PREFIX)})
    if not names:
        return None
    return Section("mteb tasks (mteb's own evaluation, main score x100)",
                   tuple(Column(n[len(MTEB_PREFIX):], n) for n in names), None, average=False)


#: the protocol variants of tasks declared from files (``benchharness.tasks.from_files``) start with
#: this; the leaderboard reads results without importing the tasks (nor numpy), hence the prefix
FILE_PROTOCOL_PREFIX = "file-"


def file_section(results: list[Result]) -> Section | None:
    """One column per task declared from a file that has a stored result, main score x100 (the
    Spearman of a pair file, the accuracy of a labelled one: no average over unrelated tasks)."""
    names = sorted({r.task for r in results if str(r.protocol.get("variant", "")).startswith(FILE_PROTOCOL_PREFIX)})
    if not names:
        return None
    return Section("Tasks from files (main score x100)", tuple(Column(n, n) for n in names), None, average=False)


def _fmt(value: float | str | None) -> str:
    if value is None or value == "":
        return ""
    return f"{float(value):.2f}"


def _cell(result: Result | None, column: Column) -> float | None:
    if result is None:
        return None
    if column.metric is None:
        return result.main_score
    value = result.metrics.get(column.metric)
    return float(value) if value is not None else None


GROUPS = ("base", "post-processed", "trained")
MARK = "†"
ALPHA = 0.05


def group_of(result: Result) -> str:
    """``post-processed`` for a ``+`` chain, ``trained`` for a result with training provenance or
    a local checkpoint (a result that records no training provenance), else ``base``."""
    if "+" in result.encoder:
        return "post-processed"
    model = str(result.encoder_identity.get("model", ""))
    if "training" in result.encoder_metadata or model.startswith(("/", "./", "../")):
        return "trained"
    return "base"


def _recipe(result: Result) -> tuple[str, int] | None:
    """(recipe key, seed) for a trained result whose provenance records its seed."""
    training = result.encoder_metadata.get("training")
    if not isinstance(training, dict) or "seed" not in training.get("hyperparameters", {}):
        return None
    hyper = {k: v for k, v in training["hyperparameters"].items() if k != "seed"}
    key = {k: training.get(k) for k in ("method", "base_model", "base_weights_sha256", "data", "dev_task")}
    return json.dumps({**key, "hyperparameters": hyper, "task": result.task}, sort_keys=True, default=str), \
        int(training["hyperparameters"]["seed"])


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


def _average(cells: list[float | None]) -> float | None:
    return sum(cells) / len(cells) if cells and all(v is not None for v in cells) else None


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
        seeds = tuple(seed for seed, _ in members)
        text, means = [], []
        for i in range(len(section.columns)):
            vals = [row.cells[i] for _, row in members]
            if any(v is None for v in vals):
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
        name = f"{named.encoder} (seeds {','.join(map(str, seeds))})"
        rest.append(Row(name, "trained", {}, means, _average(means), text, seeds, note))
    return rest


def measured(section: Section, results: list[Result]) -> list[Row]:
    rows = []
    for encoder, by_task in sorted(_by_encoder(results).items()):
        cells = [_cell(by_task.get(c.task), c) for c in section.columns]
        if all(v is None for v in cells):
            continue
        group = group_of(next(iter(by_task.values())))
        rows.append(Row(encoder, group, {c.task: by_task[c.task] for c in section.columns if c.task in by_task},
                        cells, _average(cells)))
    return aggregate_seeds(section, rows)


def _sort_key(row: Row, section: Section) -> tuple[float, str]:
    if section.average:
        value = row.average
    else:
        present = [v for v in row.cells if v is not None]
        value = sum(present) / len(present) if present else None
    return (-value if value is not None else float("inf"), row.encoder)


def marks(section: Section, rows: list[Row], store: ResultStore) -> set[tuple[str, int]]:
    """(encoder, column index) of the scores not significantly different from their column's best."""
    out: set[tuple[str, int]] = set()
    for i, column in enumerate(section.columns):
        scored = [r for r in rows if r.cells[i] is not None and column.task in r.results]
        if len(scored) < 2:
            continue
        best = max(scored, key=lambda r: r.cells[i])
        best_result = best.results[column.task]
        if not store.has_items(best_result):
            continue
        from benchharness.scoring.confidence import column_test_p  # numpy and scipy: only when items are there

        best_items = store.load_items(best_result)
        for row in scored:
            result = row.results[column.task]
            if row is best or not store.has_items(result):
                continue
            metric = column.metric or result.main_metric
            try:
                p = column_test_p(column.task, metric, best_items, store.load_items(result))
            except InvalidInputError:  # no test defined on these two (see the module docstring): no mark
                continue
            if p >= ALPHA:
                out.add((row.encoder, i))
    return out


def _interval(result: Result | None, column: Column) -> tuple[float, float] | None:
    conf = (result.confidence or {}) if result is not None else {}
    if column.metric is None:
        main = conf.get("main")
        return (main[0], main[1]) if main else None
    iv = conf.get("intervals", {}).get(column.metric)
    return (iv["low"], iv["high"]) if iv else None


def _ci_text(iv: tuple[float, float] | None) -> str:
    return "" if iv is None else f"{iv[0]:.1f}–{iv[1]:.1f}"


def _average_interval(row: Row, section: Section) -> str:
    ivs = [_interval(row.results.get(c.task), c) for c in section.columns]
    if row.average is None or any(iv is None for iv in ivs):
        return ""
    half = sum(((hi - lo) / 2) ** 2 for lo, hi in ivs) ** 0.5 / len(ivs)
    return _ci_text((row.average - half, row.average + half))


def measured_rows(section: Section, results: list[Result], store: ResultStore | None = None) -> list[list[str]]:
    """Table rows for the measured encoders: grouped, sorted by Avg., marked where items allow."""
    rows = sorted(measured(section, results), key=lambda r: (GROUPS.index(r.group), *_sort_key(r, section)))
    marked = marks(section, rows, store) if store is not None else set()
    table = []
    for row in rows:
        if row.text is not None:
            cells = list(row.text)
        else:
            cells = [_fmt(v) + (MARK if (row.encoder, i) in marked else "") for i, v in enumerate(row.cells)]
        note = row.note if row.note is not None else (
            recipe_note(list(row.results.values())) if row.group == "trained" else "")
        line = [row.encoder, f"{row.group}; {note}" if note else row.group, *cells]
        if section.average:
            line.append(_fmt(row.average))
        table.append(line)
    return table


def interval_rows(section: Section, results: list[Result]) -> list[list[str]]:
    """The stored 95% intervals of the measured rows, in the main table's order."""
    rows = sorted(measured(section, results), key=lambda r: (GROUPS.index(r.group), *_sort_key(r, section)))
    table = []
    for row in rows:
        if row.text is not None:  # a seed aggregate: its spread is the ±std in the main table
            continue
        cells = [_ci_text(_interval(row.results.get(c.task), c)) for c in section.columns]
        if section.average:
            cells.append(_average_interval(row, section))
        if any(cells):
            table.append([row.encoder, *cells])
    return table


def published_rows(section: Section, published_dir: Path | None, papers: set[str] | None) -> list[list[str]]:
    if published_dir is None or section.published_csv is None or not (published_dir / section.published_csv).exists():
        return []
    rows = []
    with open(published_dir / section.published_csv, newline="") as fh:
        for rec in csv.DictReader(fh):
            if papers is not None and rec["paper"] not in papers:
                continue
            cells = [_fmt(rec.get(c.published or "")) for c in section.columns]
            if not any(cells):
                continue
            row = [rec["model"], f"published: {rec['paper']} {rec['table']}", *cells]
            if section.average:
                row.append(_fmt(rec.get("Avg")))
            rows.append(row)
    return rows


def render(store: ResultStore, published_dir: Path | None, papers: set[str] | None = None) -> str:
    results = list(store)
    parts = ["# benchharness leaderboard", "",
             "Generated by `benchharness leaderboard` from the result files under `results/`. "
             "Rows marked *published* are copied from the method papers (`results/published/`, "
             "BERT/RoBERTa backbones) and were not measured here.", "",
             f"Rows are grouped by source (base, post-processed, trained, published) and sorted by Avg. "
             f"within each group. {MARK}: not significantly different from the best measured score of its "
             f"column (paired test on the stored per-item outputs, p >= {ALPHA}: Steiger for STS, McNemar or "
             "a fold permutation test for transfer, a query permutation test for ranking; only where both "
             "results keep items). `mean ±std`: a recipe trained with several seeds. Below each table: the "
             "95% bootstrap intervals (`lo–hi`).", ""]
    extra = [s for s in (mteb_section(results), file_section(results)) if s is not None]
    for section in (*SECTIONS, *extra):
        measured_table = measured_rows(section, results, store)
        published = published_rows(section, published_dir, papers)
        if not measured_table and not published:
            continue
        headers = ["Encoder", "Source", *(c.header for c in section.columns)]
        if section.average:
            headers.append("Avg.")
        parts += [f"## {section.title}", "", tabulate(measured_table + published, headers=headers,
                                                      tablefmt="github", disable_numparse=True), ""]
        intervals = interval_rows(section, results)
        if intervals:
            parts += ["95% confidence intervals (percentile bootstrap over pairs, test items or outer folds, "
                      "queries, as each result records):", "",
                      tabulate(intervals, headers=["Encoder", *headers[2:]], tablefmt="github",
                               disable_numparse=True), ""]
        variants = sorted({f"{r.task}: {r.protocol.get('variant')}" for r in results
                           if r.task in {c.task for c in section.columns}})
        if variants:
            parts += ["Protocol variants measured: " + "; ".join(variants), ""]
    return "\n".join(parts)
