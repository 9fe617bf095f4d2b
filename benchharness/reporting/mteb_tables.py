"""The leaderboard's mteb parts: rows of published mteb results beside the measured ones, and a
table per mteb benchmark with mteb's aggregation (``mteb_bridge.benchmarks``).

mteb is needed only here, and only when the board has mteb results or imported ones: a board of
benchharness's own tasks never imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from benchharness.core.results import Result
from benchharness.mteb_bridge.provider import PREFIX as MTEB_PREFIX
from benchharness.reporting.board import (
    ROW_GROUPS,
    Cell,
    Column,
    ImportedModel,
    Line,
    Section,
    Table,
    fmt,
    group_of,
    row_average,
)

if TYPE_CHECKING:
    from benchharness.mteb_bridge.benchmarks import Benchmark

logger = logging.getLogger(__name__)

#: the Source cell of an imported row starts with this, then the folder it was read from
IMPORTED = "published: mteb results"
#: the note below a benchmark table
NOTE = (
    "Mean(Task) and Mean(TaskType): as mteb's leaderboard computes them (mteb.Benchmark.get_score), over the "
    "benchmark's tasks as mteb filters them (languages, subsets, splits); a row without every task of a type has "
    "no mean for that type, a row without every task none for the benchmark."
)


def imported_lines(section: Section, imported: Sequence[ImportedModel]) -> list[Line]:
    """A *published* row per imported model with a score in any of the section's columns, with an
    Avg. cell where the section averages (every row of a table has a cell per header)."""
    lines = []
    for model in imported:
        values = [model.score(c.task) if c.metric is None else None for c in section.columns]
        if any(v is not None for v in values):
            if section.average:
                values.append(row_average(values))
            lines.append(_line(model, [Cell(v, fmt(v)) for v in values]))
    return lines


def _line(model: ImportedModel, cells: list[Cell]) -> Line:
    return Line(model.name, "published", f"{IMPORTED} {model.source}", cells, {}, imported=True)


def benchmark_tables(
    results: list[Result], imported: Sequence[ImportedModel], wanted: Sequence[str] = (), groups: set[str] | None = None
) -> list[Table]:
    """A table per mteb benchmark named in ``wanted`` (names or aliases), then per benchmark that a
    measured or imported row covers whole; none where mteb is not installed. ``groups``: the row
    groups shown (None: all)."""
    try:
        from benchharness.mteb_bridge import benchmarks as mteb_benchmarks
    except ImportError:
        logger.debug("mteb is not installed: no benchmark tables")
        return []
    by_encoder: dict[str, dict[str, Result]] = {}
    for r in results:
        if r.task.startswith(MTEB_PREFIX):
            by_encoder.setdefault(r.encoder, {})[r.task] = r
    found = [mteb_benchmarks.benchmark(name) for name in dict.fromkeys(wanted)]
    rows = [
        mteb_benchmarks.Coverage(
            frozenset(str(r.protocol.get("mteb_task", "")) for r in mine.values()), mine.__contains__
        )
        for mine in by_encoder.values()
    ]
    rows += [mteb_benchmarks.Coverage(m.tasks, _has_score(m)) for m in imported]
    named = {b.name for b in found}
    found += [b for b in mteb_benchmarks.covered(rows) if b.name not in named]
    return [t for b in found if (t := _table(b, by_encoder, imported, groups)) is not None]


def _has_score(model: ImportedModel) -> Callable[[str], bool]:
    return lambda task: model.score(task) is not None


def _table(
    benchmark: Benchmark,
    by_encoder: dict[str, dict[str, Result]],
    imported: Sequence[ImportedModel],
    groups: set[str] | None,
) -> Table | None:
    """Rows: every measured encoder with a result of the benchmark, then every imported model with
    a score; cells: Mean(Task), Mean(TaskType), each type's mean, and how many tasks the row has."""
    from benchharness.mteb_bridge.benchmarks import MEAN_TASK, MEAN_TASK_TYPE

    headers = [MEAN_TASK, MEAN_TASK_TYPE, *benchmark.types]
    count = f"Tasks (of {len(benchmark.tasks)})"
    lines = []
    for encoder, mine in sorted(by_encoder.items()):
        shown = {t: r for t, r in mine.items() if t in benchmark.tasks}
        group = group_of(next(iter(shown.values()))) if shown else ""
        if shown and (groups is None or group in groups):
            scores: dict[str, float | None] = {t: r.main_score for t, r in shown.items()}
            lines.append(Line(encoder, group, group, _cells(benchmark, scores, headers), shown))
    if groups is None or "published" in groups:
        for model in imported:
            scores = {t: model.score(t) for t in benchmark.tasks}
            if any(v is not None for v in scores.values()):
                lines.append(_line(model, _cells(benchmark, scores, headers)))
    if not lines:
        return None
    # by source, as every table; within one, by Mean(Task), rows without it last
    lines.sort(key=lambda line: (ROW_GROUPS.index(line.group), _descending(line.cells[0].value), line.encoder))
    section = Section(
        f"mteb benchmark {benchmark.name} (mteb's aggregation, main scores x100)",
        tuple(Column(h, "") for h in [*headers, count]),
        None,
        average=False,
    )
    variants = sorted({f"{r.protocol.get('variant')}" for line in lines for r in line.results.values()})
    return Table(section, [*headers, count], lines, [NOTE], [f"mteb tasks: {', '.join(variants)}"] if variants else [])


def _descending(value: float | None) -> float:
    return -value if value is not None else float("inf")


def _cells(benchmark: Benchmark, scores: Mapping[str, float | None], headers: list[str]) -> list[Cell]:
    aggregates = benchmark.aggregate(scores)
    have = sum(v is not None for v in scores.values())
    return [*(Cell(aggregates[h], fmt(aggregates[h])) for h in headers), Cell(None, str(have))]
