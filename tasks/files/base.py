"""What every task declared from files shares (``benchharness.tasks.files.declarations``): the checked
declaration, reading a declared file's records with their line numbers, and the ``FileTask`` base
whose metadata is its protocol family's completed from the file.

It is its own module so that the kinds built on it (the pair and labelled-sentence kinds in
``from_files``, the retrieval and reranking kinds in ``ranking_files``) import it, and
``from_files``, which declares every kind, imports them all without an import circle.
"""

from __future__ import annotations

import csv
import io
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.task import BoardColumn, BoardSection, Task, TaskMetadata
from benchharness.data.readers import check_data_file, excerpt, json_lines, undecodable_message
from benchharness.tasks import boards
from benchharness.tasks.senteval.config import ClassifierConfig

GROUP = "files"
TEXT = "as in the file (not re-joined, not lowercased)"


@dataclass(frozen=True)
class Declaration:
    """A checked declaration: everything a file task is built from."""

    name: str
    path: Path  # the file, or a retrieval task's BEIR folder
    kind: str
    fmt: str
    columns: dict[str, str]  # column key -> column name in the file
    score_range: tuple[float, float] | None  # pairs: the range every gold score must lie in
    config: ClassifierConfig  # labels: SentEval's classifier config
    split: str | None = None  # retrieval: the qrels file read (qrels/<split>.tsv)
    instruction: str | None = None  # TaskMetadata.instruction: the query side of prompted models
    search: str = "float32"  # retrieval: the precision the corpus is searched in (scoring.quantized_search)
    rescore: int | None = None  # retrieval: rescore the best k x rescore by the float query


# ------------------------------------------------------------------------------------------------
# reading a file

Row = tuple[int, Mapping[str, Any]]  # (line number, value by column)


def read_rows(decl: Declaration) -> list[Row]:
    """The records of a declared file with their line numbers (1-based; a CSV/TSV header is line
    1), each holding every declared column."""
    path = decl.path
    columns = list(decl.columns.values())
    check_data_file(path)
    if decl.fmt == "jsonl":
        return _json_rows(path, columns, decl.name)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        lines = path.read_text(encoding="utf-8-sig", errors="surrogateescape").split("\n")
        raise DataError(undecodable_message(path, lines, exc)) from None
    except OSError as exc:  # missing, a folder, unreadable
        raise DataError(f"{path}: {exc.strerror or exc} (the file of task {decl.name!r})") from None
    return _delimited_rows(path, text, decl.fmt, columns)


def _delimited_rows(path: Path, text: str, fmt: str, columns: list[str]) -> list[Row]:
    dialect: dict[str, Any] = {"delimiter": ","} if fmt == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
    reader = csv.reader(io.StringIO(text, newline=""), **dialect)
    rows: list[Row] = []
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}:1: empty file; its first line must name the columns ({', '.join(columns)})")
        require(path, 1, header, columns, "column")
        for fields in reader:
            if not fields:  # a blank line
                continue
            if len(fields) != len(header):
                raise DataError(f"{path}:{reader.line_num}: {len(fields)} fields; the header names {len(header)}")
            rows.append((reader.line_num, dict(zip(header, fields))))
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: {exc}") from None
    return rows


def _json_rows(path: Path, columns: list[str], task: str) -> list[Row]:
    try:
        path.open("rb").close()
    except OSError as exc:  # missing, a folder, unreadable: named with the task, as for the other formats
        raise DataError(f"{path}: {exc.strerror or exc} (the file of task {task!r})") from None
    rows: list[Row] = []
    for line_no, record in json_lines(path):
        require(path, line_no, record, columns, "key")
        rows.append((line_no, record))
    return rows


def require(path: Path, line: int, present: Any, columns: list[str], what: str) -> None:
    """Every one of ``columns`` is among ``present`` (a header, a JSON object), else one line naming
    the first missing one."""
    missing = [c for c in columns if c not in present]
    if missing:
        raise DataError(f"{path}:{line}: no {what} {missing[0]!r}; found {excerpt(', '.join(map(str, present)))}")


def sentence(path: Path, line: int, value: Any, column: str) -> str:
    """A sentence as the file holds it; non-empty text, else one line naming file, line and column."""
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{path}:{line}: {column!r} is {excerpt(value)}; every sentence must be non-empty text")
    return value


# ------------------------------------------------------------------------------------------------
# the task base


class FileTask(Task):
    """What every kind shares: the declaration, the data read once (on load, or when the metadata
    is first asked for), and metadata that is the protocol family's completed from the data."""

    decl: Declaration
    #: the leaderboard table of the tasks of this class (a researcher's own files share one), and the
    #: header of the task's column there (None: the task's name)
    board_section: BoardSection = boards.FILES
    board_header: str | None = None

    @property
    def metadata(self) -> TaskMetadata:
        """The declared metadata with the data's size and what was read from it. Data that cannot
        be read still give metadata, saying why, so that ``list tasks`` lists every task; loading
        the task raises the error."""
        try:
            n, details = self._summary()
        except DataError as exc:
            return replace(self._declared, description=f"{self._declared.description} [cannot read: {exc}]")
        return replace(self._declared, n_samples=n, protocol_details={**self._declared.protocol_details, **details})

    @metadata.setter
    def metadata(self, value: TaskMetadata) -> None:
        """What the protocol family declares (its constructor sets it), before the data are read;
        the declaration's instruction, if any, goes to the query side of prompted models."""
        self._declared = replace(
            value,
            instruction=self.decl.instruction,
            board=self.board_section,
            board_columns=(BoardColumn(self.board_header),),
            on_board=True,
        )

    @property
    def declared(self) -> TaskMetadata:
        return self._declared

    @cached_property
    def content(self) -> Any:
        """The data, read and checked (a failed read is not kept: the next access tries again)."""
        return self._read_declared()

    def _summary(self) -> tuple[int, dict[str, Any]]:
        """The number of scored items and what the protocol records of the data."""
        content = self.content
        return content.n, {**self._source(), **self._details(content)}

    def _read_declared(self) -> Any:
        """The declared file's records, checked row by row by ``_read``; a kind whose data are not
        one file of rows (a BEIR folder) overrides this."""
        return self._read(read_rows(self.decl))

    def _load(self, data: DataRoot) -> None:
        self.files.extend(self._data_files())
        self._use(self.content)

    def _data_files(self) -> list[Path]:
        """The files whose sha256 enters the result."""
        return [self.decl.path]

    def _source(self) -> dict[str, Any]:
        """What the protocol records of where the data came from and how they were read."""
        return {
            "file": self.decl.path.name,
            "format": self.decl.fmt,
            "columns": self.decl.columns,
            "text": TEXT,
            "items": "in the file's row order",
        }

    def _read(self, rows: list[Row]) -> Any:
        """The file's content (an object with ``n``, the number of scored items), checked row by
        row."""
        raise NotImplementedError

    @abstractmethod
    def _use(self, content: Any) -> None:
        """Hand the content to the protocol family's attributes."""

    @abstractmethod
    def _details(self, content: Any) -> dict[str, Any]:
        """What the protocol records of the content, beside ``_source``."""
