"""The leaderboard's tables as data: sections and their columns, rows and cells, and the board
that holds them (``leaderboard.build`` fills them, ``table_formats`` prints them, ``mteb_tables``
adds the mteb benchmarks' tables)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from benchharness.core.results import Result


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
    #: the Avg. is a group's mean declared a score of its own (NanoBEIR's, ``TaskProvider.means``): its
    #: interval is resampled within each task from the stored items, not approximated from the intervals
    resampled: bool = False


def fmt(value: float | str | None) -> str:
    if value is None or value == "":
        return ""
    return f"{float(value):.2f}"


def row_average(cells: list[float | None]) -> float | None:
    """A row's Avg.: the mean of its cells, only when it has every column (as the papers average)."""
    present = [v for v in cells if v is not None]
    return sum(present) / len(present) if cells and len(present) == len(cells) else None


GROUPS = ("base", "post-processed", "trained")


def group_of(result: Result) -> str:
    """``post-processed`` for a ``+`` chain, ``trained`` for a result with training provenance or
    a local checkpoint (a result that records no training provenance), else ``base``."""
    if "+" in result.encoder:
        return "post-processed"
    model = str(result.encoder_identity.get("model", ""))
    if "training" in result.encoder_metadata or model.startswith(("/", "./", "../")):
        return "trained"
    return "base"


@dataclass(frozen=True)
class PromptNote:
    """Prompts shared by some of a row's results: ``prompts`` by spec key (empty: none, beside
    results with prompts), ``headers`` the columns they were scored in (empty: every column)."""

    prompts: tuple[tuple[str, str], ...]
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Instruction:
    """The instruction ``text`` (None: none) the results of ``task`` shown were computed with;
    ``encoders`` names their rows where the rows shown differ in it (else empty)."""

    task: str
    text: str | None
    encoders: tuple[str, ...] = ()


@dataclass
class Cell:
    """One score of a table: its value, how it prints, its interval and marks."""

    value: float | None
    text: str
    interval: tuple[float, float] | None = None
    marked: bool = False  # not significantly different from the column's best measured score
    best: bool = False  # the best value of its column among the rows shown


@dataclass
class Line:
    """One row of a leaderboard table."""

    encoder: str
    group: str  # one of ROW_GROUPS
    source: str  # the Source column: group, and the recipe or the paper and table
    cells: list[Cell]  # one per column, then Avg. where the section averages
    results: dict[str, Result]  # by task; empty for published rows and seed aggregates
    prompts: tuple[PromptNote, ...] = ()  # those its results were computed with (``prompt_notes``)
    imported: bool = False  # a published row read from an mteb results folder, not from a paper


@dataclass
class Table:
    section: Section
    headers: list[str]  # the score columns, then "Avg." where the section averages
    lines: list[Line]
    notes: list[str]  # why a mark could not be computed
    variants: list[str]  # the protocol variants of the measured results
    instructions: list[Instruction] = field(default_factory=list)  # of the tasks whose results shown have one

    @property
    def has_intervals(self) -> bool:
        return any(c.interval for line in self.lines for c in line.cells)


@dataclass
class Board:
    tables: list[Table]
    results_label: str  # the results folder read, as the header names it
    #: where published rows were looked for, as the prose names it; None where they were left out
    published_source: str | None = None

    #: the mteb results folders whose rows are shown (``mteb_tables``), as given
    imported: tuple[str, ...] = ()

    @property
    def published_rows(self) -> int:
        """The rows copied from the papers (not those read from mteb results folders)."""
        return sum(line.group == "published" and not line.imported for table in self.tables for line in table.lines)


ROW_GROUPS = (*GROUPS, "published")


class ImportedModel(Protocol):
    """A model of an mteb results folder (``mteb_bridge.published.PublishedModel``): its rows are
    published ones, beside the measured rows of the leaderboard and ``compare``."""

    name: str  # as mteb names it, ``org/model``
    source: str  # the folder it was read from, as given

    @property
    def tasks(self) -> frozenset[str]:
        """mteb's names of the tasks it has results of."""

    def score(self, task: str) -> float | None:
        """Its main score x100 on a benchharness task, None where it has none."""
