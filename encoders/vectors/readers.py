"""The reading side of the ``vectors`` format: a folder (``sentences.jsonl`` + ``vectors.npy``), a
``.jsonl`` or a ``.parquet`` file, each read into a ``VectorTable`` and checked (every key once,
every value finite, one row per line), with errors naming the file and line or row; and what the
readers of the other kinds' folders (``kind_readers``) share: the lines, the kind a folder holds."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.digests import sha256_file
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.kinds import DENSE
from benchharness.core.prompts import ROLE_NAMES
from benchharness.data.readers import json_lines
from benchharness.encoders.vectors.layout import (
    KEYED_SUFFIXES,
    KIND_FILES,
    SAVED_AS,
    SENTENCES,
    SENTENCES_DIGEST,
    SIMILARITY,
    SPARSE_VECTORS,
    TOKEN_OFFSETS,
    TOKENS,
    VECTORS,
    RoleKey,
    quote,
    role_text,
)

#: bytes of vectors checked at a time for non-finite values
CHECK_BYTES = 16 * 2**20


@dataclass
class RowIndex:
    """Rows by key: ``rows[(role, instruction)][text]`` is the number of a line of the file (of
    ``sentences.jsonl`` in a folder); ``where`` names the file for messages."""

    rows: dict[RoleKey, dict[str, int]]
    where: str

    @property
    def has_roles(self) -> bool:
        """Whether any row is for a role other than the default."""
        return any(key != (None, None) for key in self.rows)


@dataclass
class VectorTable(RowIndex):
    """Dense rows: row ``i`` of ``vectors`` (a float array, possibly memory-mapped, of any float
    dtype) is line ``i``'s vector."""

    vectors: np.ndarray

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Rows ``positions`` as float32 (``read_rows``)."""
        return read_rows(self.vectors, positions)


def read_rows(array: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Rows ``positions`` of a 2-d array as float32. From a C-ordered memory map they are read with
    ``pread``, each run of consecutive rows in one call, rather than through the map, whose touched
    pages would count in the process's resident memory for as long as the map lives (the whole
    file, once a pass has asked for every row)."""
    if not (isinstance(array, np.memmap) and array.flags.c_contiguous and array.filename):
        return np.asarray(array[positions], dtype=np.float32)
    row = array.shape[1] * array.dtype.itemsize
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    out = np.empty((len(positions), array.shape[1]), dtype=np.float32)
    # runs of consecutive rows, cut to at most CHECK_BYTES each (a read's bytes exist twice for a moment)
    step = max(1, CHECK_BYTES // row)
    breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
    edges = np.concatenate([[0], breaks, [len(ordered)]]).tolist()
    pieces = [(a, min(a + step, end)) for start, end in pairwise(edges) for a in range(start, end, step)]
    fd = os.open(array.filename, os.O_RDONLY)
    try:
        for a, b in pieces:
            size = (b - a) * row
            data = os.pread(fd, size, array.offset + int(ordered[a]) * row)
            if len(data) != size:
                raise InvalidInputError(
                    f"{array.filename}: read {len(data)} of {size} bytes; the file changed or was cut while in use"
                )
            out[order[a:b]] = np.frombuffer(data, dtype=array.dtype).reshape(b - a, -1)
    finally:
        os.close(fd)
    return out


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) of each line of a JSON-lines file (``data.readers.json_lines``'s
    rules: a BOM accepted, blank lines skipped); a file with none is refused."""
    found = False
    for lineno, record in json_lines(path, InvalidInputError):
        found = True
        yield lineno, record
    if not found:
        raise InvalidInputError(f"{path}: no lines; write the sentences with `benchharness sentences`")


def _key_of(record: dict[str, Any], where: str) -> tuple[str, RoleKey]:
    """The text and (role, instruction) of one record, checked; ``where`` is ``file:line``."""
    text = record.get("text")
    if not isinstance(text, str):
        raise InvalidInputError(f"{where}: 'text' must be a string, not {_kind(text)}")
    role = record.get("role")
    if role in (None, "", "default"):
        role = None
    elif role not in ROLE_NAMES:
        raise InvalidInputError(f"{where}: role {role!r}; use default, query or document")
    instruction = record.get("instruction")
    if instruction in (None, ""):
        instruction = None
    elif not isinstance(instruction, str):
        raise InvalidInputError(f"{where}: 'instruction' must be a string, not {_kind(instruction)}")
    elif role != "query":
        raise InvalidInputError(
            f"{where}: an instruction is given to a query only, not to the {role or 'default'} role"
        )
    return text, (role, instruction)


def _kind(value: Any) -> str:
    return "missing" if value is None else type(value).__name__


def _index(keys: Iterable[tuple[str, RoleKey]], places: Sequence[str]) -> dict[RoleKey, dict[str, int]]:
    """Row numbers by key; ``places[i]`` names row i (``file:line``) for the error on a repeated key."""
    rows: dict[RoleKey, dict[str, int]] = {}
    for i, (text, key) in enumerate(keys):
        table = rows.setdefault(key, {})
        first = table.setdefault(text, i)
        if first != i:
            raise InvalidInputError(
                f"{places[i]}: repeats {places[first]} ({quote(text)} as {role_text(key)}); "
                "keep one row per sentence and role"
            )
    return rows


def _blocks(vectors: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) of ``vectors`` a block at a time, about ``CHECK_BYTES`` each. A C-ordered
    memory map is read with plain file reads instead: mapped pages once touched count in the
    process's resident memory until unmapped, and the map is kept for serving rows."""
    n, dim = vectors.shape
    step = max(1, CHECK_BYTES // (dim * vectors.dtype.itemsize))
    if isinstance(vectors, np.memmap) and vectors.flags.c_contiguous and vectors.filename:
        with open(vectors.filename, "rb") as fh:
            for start in range(0, n, step):
                count = min(step, n - start)
                fh.seek(vectors.offset + start * dim * vectors.dtype.itemsize)
                yield start, np.fromfile(fh, dtype=vectors.dtype, count=count * dim).reshape(count, dim)
        return
    for start in range(0, n, step):
        yield start, np.asarray(vectors[start : start + step])


def check_finite(vectors: np.ndarray, row_name: Callable[[int], str]) -> None:
    """Refuse a NaN or infinite value (also a float64 value beyond float32's range, which the rows
    become), naming the first such row with ``row_name(i)``."""
    for start, rows in _blocks(vectors):
        with np.errstate(over="ignore"):
            bad = ~np.isfinite(rows.astype(np.float32, copy=False)).all(axis=1)
        if bad.any():
            i = start + int(np.argmax(bad))
            raise InvalidInputError(
                f"{row_name(i)}: the vector is not finite (NaN or infinite, or beyond float32's "
                "range); fix the encoding of that sentence"
            )


@dataclass(frozen=True)
class FolderLines:
    """The checked lines of a folder's ``sentences.jsonl``, which the rows of its data files answer
    in order: the key of each line, and how messages name a row."""

    folder: Path
    keys: list[tuple[str, RoleKey]]

    def __len__(self) -> int:
        return len(self.keys)

    def line(self, i: int) -> str:
        """Line ``i`` (from 0) as messages name it, with its text."""
        return f"{SENTENCES} line {i + 1}, {quote(self.keys[i][0])}"

    def row(self, path: Path, i: int) -> str:
        """Row ``i`` of the data file ``path`` as messages name it, with the line it answers."""
        return f"{path}: row {i} ({self.line(i)})"

    def check_count(self, path: Path, count: int) -> None:
        """Refuse a data file of another count of rows than there are lines."""
        if count != len(self.keys):
            raise InvalidInputError(
                f"{path}: {count:,} rows for the {len(self.keys):,} lines of {self.folder / SENTENCES}; save "
                "one row per line, in the order of the lines"
            )

    def index(self) -> dict[RoleKey, dict[str, int]]:
        lines = self.folder / SENTENCES
        return _index(self.keys, [f"{lines}:{i + 1}" for i in range(len(self.keys))])


def read_lines(folder: Path, kind: str) -> FolderLines:
    """``folder/sentences.jsonl``, checked against its digest, once the files of ``kind`` are found
    beside it (``layout.KIND_FILES``)."""
    lines = folder / SENTENCES
    for path in (lines, *(folder / name for name in KIND_FILES[kind])):
        if not path.is_file():
            raise MissingFileError(_missing_message(folder, path))
    _check_digest(folder, lines, KIND_FILES[kind])
    return FolderLines(folder, [_key_of(record, f"{lines}:{n}") for n, record in _records(lines)])


def load_array(path: Path, what: str, mmap: bool = True) -> np.ndarray:
    """One array saved by ``numpy.save`` (a memory map unless ``mmap`` is false: its header only is
    read), refused in one line when it is pickled, not the format at all, or an archive."""
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError as exc:  # a pickled (object) array, or not the .npy format at all
        raise InvalidInputError(f"{path}: not {what} saved by numpy.save ({exc})") from None
    if not isinstance(array, np.ndarray):
        raise InvalidInputError(f"{path}: one array saved by numpy.save is expected, not an archive")
    return array


def check_float_rows(path: Path, array: np.ndarray, expected: str) -> None:
    """Refuse what is not a 2-d float array of at least one column; ``expected`` is its shape in words."""
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.floating) or array.shape[1] == 0:
        raise InvalidInputError(
            f"{path}: shape {array.shape} of {array.dtype}; expected a float array of shape {expected}"
        )


def read_folder(folder: Path) -> VectorTable:
    """``folder/sentences.jsonl`` and ``folder/vectors.npy``, checked against each other: a float
    array of one row per line, every value finite. The array is opened as a memory map, which
    reads its header only: its rows are read when asked for (``VectorTable.take``)."""
    lines = read_lines(folder, DENSE)
    if (folder / SIMILARITY).exists():
        raise InvalidInputError(
            f"{folder / SIMILARITY}: dense vectors are compared by each task's own measure (cosine); a similarity is "
            f"named for a sparse ({SPARSE_VECTORS}) or multi-vector ({TOKENS}) model's outputs only: delete the file"
        )
    vectors_path = folder / VECTORS
    vectors = load_array(vectors_path, "a float array")
    check_float_rows(vectors_path, vectors, f"({len(lines)}, dim): one row per line of {SENTENCES}")
    lines.check_count(vectors_path, len(vectors))
    check_finite(vectors, lambda i: lines.row(vectors_path, i))
    return VectorTable(lines.index(), str(folder), vectors)


def _check_digest(folder: Path, lines: Path, data_files: Sequence[str]) -> None:
    """Refuse a ``sentences.jsonl`` that differs from what ``benchharness sentences`` wrote (its
    ``sentences.sha256``): the rows were computed for the lines as written. A folder without the
    digest (written by hand) is read as it is. Rows saved in another order than the lines cannot be
    told from the files: that stays the user's to keep."""
    recorded = folder / SENTENCES_DIGEST
    if not recorded.is_file():
        return
    expected = recorded.read_text().strip()
    actual = sha256_file(lines)
    if actual != expected:
        raise InvalidInputError(
            f"{lines} changed since `benchharness sentences` wrote it (sha256 {actual[:12]}..., written "
            f"{expected[:12]}...): its rows in {' and '.join(data_files)} were computed for the lines as written; "
            "write the sentences again and encode them, or delete sentences.sha256 to read the folder as it is"
        )


def _missing_message(folder: Path, path: Path) -> str:
    if path.name == SENTENCES:
        return (
            f"{path} not found; write it with `benchharness sentences --tasks ... --out {folder}`, then save the "
            f"vectors of its lines as {VECTORS}"
        )
    if path.name == VECTORS:
        return (
            f"{path} not found; encode the lines of {folder / SENTENCES} and save them there with numpy.save, "
            f"one float32 row per line, in the order of the lines (a sparse model's rows as {SPARSE_VECTORS}, a "
            f"multi-vector model's token vectors as {TOKENS} and {TOKEN_OFFSETS})"
        )
    return f"{path} not found; save there {SAVED_AS[path.name]}"


def folder_kind(folder: Path) -> str:
    """The kind of model whose outputs ``folder`` holds, told by its files (``layout.KIND_FILES``):
    dense when it holds none (its reader then says ``vectors.npy`` is missing); a folder with the
    files of two kinds is refused."""
    found = {kind: [n for n in names if (folder / n).exists()] for kind, names in KIND_FILES.items()}
    kinds = [kind for kind, names in found.items() if names]
    if len(kinds) > 1:
        held = ", ".join(f"{found[kind][0]} ({kind})" for kind in kinds)
        raise InvalidInputError(
            f"{folder} holds the outputs of more than one kind of model: {held}; keep one model's files in a folder"
        )
    return kinds[0] if kinds else DENSE


def _vector(value: Any, where: str) -> list[float]:
    if not isinstance(value, list) or not value:
        raise InvalidInputError(f"{where}: 'vector' must be a non-empty list of numbers, not {_kind(value)}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise InvalidInputError(f"{where}: 'vector' holds something other than numbers")
    return value


def read_jsonl(path: Path) -> VectorTable:
    """A JSON-lines file of ``{"text", "vector", "role"?, "instruction"?}`` objects."""
    keys: list[tuple[str, RoleKey]] = []
    places: list[str] = []
    rows: list[list[float]] = []
    for lineno, record in _records(path):
        where = f"{path}:{lineno}"
        keys.append(_key_of(record, where))
        vector = _vector(record.get("vector"), where)
        if rows and len(vector) != len(rows[0]):
            raise InvalidInputError(f"{where}: {len(vector)} values, but {places[0]} has {len(rows[0])}")
        if not all(math.isfinite(v) for v in vector):  # json reads NaN and Infinity
            raise InvalidInputError(
                f"{where}: the vector is not finite (NaN or infinite); fix the encoding of that sentence"
            )
        rows.append(vector)
        places.append(where)
    vectors = np.asarray(rows, dtype=np.float64)
    check_finite(vectors, lambda i: places[i])
    return VectorTable(_index(keys, places), str(path), vectors)


def read_parquet(path: Path) -> VectorTable:
    """A Parquet file with columns ``text``, ``vector`` (a list of floats, one length throughout),
    and optionally ``role`` and ``instruction``; read with pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidInputError(
            f"{path}: reading a .parquet file needs the pyarrow package (pip install pyarrow); "
            "or give a .jsonl file, or a folder with sentences.jsonl and vectors.npy"
        ) from None
    try:
        names = pq.read_schema(path).names
        wanted = [c for c in ("text", "vector", "role", "instruction") if c in names]
        table = pq.read_table(path, columns=wanted)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"{path}: not a readable Parquet file ({exc})") from None
    for column in ("text", "vector"):
        if column not in names:
            raise InvalidInputError(
                f"{path}: no column {column!r} (it has {', '.join(names)}); expected text, vector and optionally role"
            )
    vector = table.column("vector").combine_chunks()
    if not (
        pa.types.is_list(vector.type) or pa.types.is_large_list(vector.type) or pa.types.is_fixed_size_list(vector.type)
    ) or not pa.types.is_floating(vector.type.value_type):
        raise InvalidInputError(f"{path}: column 'vector' is {vector.type}; expected a list of floats")
    n = len(table)
    if n == 0:
        raise InvalidInputError(f"{path}: no rows")
    places = [f"{path} row {i}" for i in range(n)]
    lengths = pc.list_value_length(vector).to_numpy(zero_copy_only=False)
    if vector.null_count:
        raise InvalidInputError(
            f"{places[int(np.flatnonzero(pc.is_null(vector).to_numpy(zero_copy_only=False))[0])]}: no vector"
        )
    if (lengths != lengths[0]).any() or lengths[0] == 0:
        i = int(np.argmax(lengths != lengths[0])) if lengths[0] else 0
        raise InvalidInputError(f"{places[i]}: {int(lengths[i])} values, but row 0 has {int(lengths[0])}")
    # a null within a vector becomes NaN here, and is refused as not finite
    vectors = vector.flatten().to_numpy(zero_copy_only=False).reshape(n, int(lengths[0]))
    columns = {c: table.column(c).to_pylist() for c in wanted if c != "vector"}
    keys = [_key_of({c: values[i] for c, values in columns.items()}, places[i]) for i in range(n)]
    check_finite(vectors, lambda i: places[i])
    return VectorTable(_index(keys, places), str(path), vectors)


def read_vectors(path: Path) -> VectorTable:
    """The table of a folder, a ``.jsonl`` or a ``.parquet`` file."""
    if path.is_dir():
        return read_folder(path)
    if path.suffix == ".parquet":
        return read_parquet(path)
    return read_jsonl(path)


def check_target(path: Path) -> None:
    """Refuse a path that is none of the three layouts, before anything is read."""
    if path.is_dir():
        kind = folder_kind(path)
        for name in (SENTENCES, *KIND_FILES[kind]):
            if not (path / name).is_file():
                raise MissingFileError(_missing_message(path, path / name))
    elif not path.exists():
        raise MissingFileError(
            f"vectors: {path} not found; give a folder with {SENTENCES} and {VECTORS}, or a "
            ".jsonl or .parquet file of text and vector"
        )
    elif path.suffix not in KEYED_SUFFIXES:
        raise InvalidInputError(
            f"vectors: {path} is neither a folder nor a .jsonl or .parquet file (a sparse or multi-vector model's "
            f"files go in a folder beside {SENTENCES})"
        )
