"""The reading side of the ``vectors`` format: a folder (``sentences.jsonl`` + ``vectors.npy``), a
``.jsonl`` or a ``.parquet`` file, each read into a ``VectorTable`` and checked (every key once,
every value finite, one row per line), with errors naming the file and line or row."""

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
from benchharness.core.prompts import ROLE_NAMES
from benchharness.data.readers import json_lines
from benchharness.encoders.vectors.layout import (
    KEYED_SUFFIXES,
    SENTENCES,
    SENTENCES_DIGEST,
    VECTORS,
    RoleKey,
    quote,
    role_text,
)

#: bytes of vectors checked at a time for non-finite values
CHECK_BYTES = 16 * 2**20


@dataclass
class VectorTable:
    """Rows by key: ``rows[(role, instruction)][text]`` is a row of ``vectors`` (a float array,
    possibly memory-mapped, of any float dtype); ``where`` names the file for messages."""

    rows: dict[RoleKey, dict[str, int]]
    vectors: np.ndarray
    where: str

    @property
    def has_roles(self) -> bool:
        """Whether any row is for a role other than the default."""
        return any(key != (None, None) for key in self.rows)

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Rows ``positions`` as float32. From a C-ordered memory map they are read with ``pread``, each
        run of consecutive rows in one call, rather than through the map, whose touched pages would
        count in the process's resident memory for as long as the map lives (the whole file, once a
        pass has asked for every row)."""
        vectors = self.vectors
        if not (isinstance(vectors, np.memmap) and vectors.flags.c_contiguous and vectors.filename):
            return np.asarray(vectors[positions], dtype=np.float32)
        row = vectors.shape[1] * vectors.dtype.itemsize
        order = np.argsort(positions, kind="stable")
        ordered = positions[order]
        out = np.empty((len(positions), vectors.shape[1]), dtype=np.float32)
        # runs of consecutive rows, cut to at most CHECK_BYTES each (a read's bytes exist twice for a moment)
        step = max(1, CHECK_BYTES // row)
        breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
        edges = np.concatenate([[0], breaks, [len(ordered)]]).tolist()
        pieces = [(a, min(a + step, end)) for start, end in pairwise(edges) for a in range(start, end, step)]
        fd = os.open(vectors.filename, os.O_RDONLY)
        try:
            for a, b in pieces:
                size = (b - a) * row
                data = os.pread(fd, size, vectors.offset + int(ordered[a]) * row)
                if len(data) != size:
                    raise InvalidInputError(
                        f"{vectors.filename}: read {len(data)} of {size} bytes; the file changed "
                        "or was cut while in use"
                    )
                out[order[a:b]] = np.frombuffer(data, dtype=vectors.dtype).reshape(b - a, -1)
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


def _check_finite(vectors: np.ndarray, row_name: Callable[[int], str]) -> None:
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


def read_folder(folder: Path) -> VectorTable:
    """``folder/sentences.jsonl`` and ``folder/vectors.npy``, checked against each other: a float
    array of one row per line, every value finite. The array is opened as a memory map, which
    reads its header only: its rows are read when asked for (``VectorTable.take``)."""
    lines, vectors_path = folder / SENTENCES, folder / VECTORS
    for path in (lines, vectors_path):
        if not path.is_file():
            raise MissingFileError(_missing_message(folder, path))
    _check_digest(folder, lines)
    keys = [_key_of(record, f"{lines}:{n}") for n, record in _records(lines)]
    try:
        vectors = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:  # a pickled (object) array, or not the .npy format at all
        raise InvalidInputError(f"{vectors_path}: not a float array saved by numpy.save ({exc})") from None
    if not isinstance(vectors, np.ndarray):
        raise InvalidInputError(f"{vectors_path}: one array saved by numpy.save is expected, not an archive")
    if vectors.ndim != 2 or not np.issubdtype(vectors.dtype, np.floating) or vectors.shape[1] == 0:
        raise InvalidInputError(
            f"{vectors_path}: shape {vectors.shape} of {vectors.dtype}; expected a float array "
            f"of shape ({len(keys)}, dim): one row per line of {SENTENCES}"
        )
    if len(vectors) != len(keys):
        raise InvalidInputError(
            f"{vectors_path}: {len(vectors):,} rows for the {len(keys):,} lines of {lines}; save "
            "one row per line, in the order of the lines"
        )
    _check_finite(vectors, lambda i: f"{vectors_path}: row {i} ({SENTENCES} line {i + 1}, {quote(keys[i][0])})")
    return VectorTable(_index(keys, [f"{lines}:{i + 1}" for i in range(len(keys))]), vectors, str(folder))


def _check_digest(folder: Path, lines: Path) -> None:
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
            f"{expected[:12]}...): its rows in {VECTORS} were computed for the lines as written; write the "
            "sentences again and encode them, or delete sentences.sha256 to read the folder as it is"
        )


def _missing_message(folder: Path, path: Path) -> str:
    if path.name == SENTENCES:
        return (
            f"{path} not found; write it with `benchharness sentences --tasks ... --out {folder}`, then save the "
            f"vectors of its lines as {VECTORS}"
        )
    return (
        f"{path} not found; encode the lines of {folder / SENTENCES} and save them there with numpy.save, "
        "one float32 row per line, in the order of the lines"
    )


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
    _check_finite(vectors, lambda i: places[i])
    return VectorTable(_index(keys, places), vectors, str(path))


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
    _check_finite(vectors, lambda i: places[i])
    return VectorTable(_index(keys, places), vectors, str(path))


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
        for name in (SENTENCES, VECTORS):
            if not (path / name).is_file():
                raise MissingFileError(_missing_message(path, path / name))
    elif not path.exists():
        raise MissingFileError(
            f"vectors: {path} not found; give a folder with {SENTENCES} and {VECTORS}, or a "
            ".jsonl or .parquet file of text and vector"
        )
    elif path.suffix not in KEYED_SUFFIXES:
        raise InvalidInputError(f"vectors: {path} is neither a folder nor a .jsonl or .parquet file")
