"""The readers of a folder of a sparse or a multi-vector model's outputs, computed elsewhere for the
lines of its ``sentences.jsonl`` (``layout``): each checked when it is read (one row per line, every
value finite, a well-formed matrix or offsets array), with errors naming the file and the line.

- sparse: ``vectors.npz``, a scipy.sparse matrix of one row per line whose width is the vocabulary,
  read whole (a CSR matrix is about 8 bytes per active term) as float32 CSR;
- multi-vector: ``tokens.npy`` (every line's token vectors stacked) opened as a memory map, its rows
  read when asked for, and ``token_offsets.npy`` (where each line's rows start, then the end).

Either may have ``similarity.json``, ``{"similarity": ...}``: how the model compares its outputs
(dot or cosine for sparse rows, dot by default as SPLADE; maxsim or meanmaxsim for token vectors,
maxsim by default).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import MULTI_VECTOR, SPARSE
from benchharness.encoders.st_multi_vector import SIMILARITIES as MULTI_VECTOR_SIMILARITIES
from benchharness.encoders.vectors.layout import SENTENCES, SIMILARITY, SPARSE_VECTORS, TOKEN_OFFSETS, TOKENS
from benchharness.encoders.vectors.readers import (
    FolderLines,
    RowIndex,
    check_finite,
    check_float_rows,
    load_array,
    read_lines,
    read_rows,
)
from benchharness.scoring.sparse import SIMILARITIES as SPARSE_SIMILARITIES

#: the similarities a folder of each kind may name, its default first
SIMILARITIES = {SPARSE: SPARSE_SIMILARITIES, MULTI_VECTOR: MULTI_VECTOR_SIMILARITIES}


@dataclass
class ScoredIndex(RowIndex):
    """The rows of a kind's outputs and the similarity they are compared by (``similarity.json``)."""

    similarity: str


@dataclass
class SparseTable(ScoredIndex):
    """Sparse rows: row ``i`` of ``matrix`` (float32 CSR, canonical: sorted, no duplicate or stored
    zero) is line ``i``'s vector."""

    matrix: Any

    def take(self, positions: np.ndarray) -> Any:
        return self.matrix[positions]


@dataclass
class TokenTable(ScoredIndex):
    """Token vectors: line ``i``'s are rows ``offsets[i]`` to ``offsets[i + 1]`` of ``tokens``
    (possibly memory-mapped, any float dtype)."""

    tokens: np.ndarray
    offsets: np.ndarray

    def take(self, positions: np.ndarray) -> list[np.ndarray]:
        """The float32 token vectors of lines ``positions``; only their rows are read (``read_rows``)."""
        starts, ends = self.offsets[positions], self.offsets[positions + 1]
        lengths = ends - starts
        # the rows of every line asked for, in order: each line's start, then one row after another
        first = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        rows = read_rows(self.tokens, first + np.arange(int(lengths.sum()), dtype=np.int64))
        return np.split(rows, np.cumsum(lengths)[:-1])


def read_sparse_folder(folder: Path) -> SparseTable:
    """``folder/sentences.jsonl`` and ``folder/vectors.npz``, checked against each other."""
    import scipy.sparse as sp

    lines = read_lines(folder, SPARSE)
    path = folder / SPARSE_VECTORS
    try:
        loaded = sp.load_npz(path)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(f"{path}: not a sparse matrix saved by scipy.sparse.save_npz ({exc})") from None
    if not (np.issubdtype(loaded.dtype, np.floating) or np.issubdtype(loaded.dtype, np.integer)):
        raise InvalidInputError(f"{path}: values of {loaded.dtype}; expected float values (float32)")
    if loaded.ndim != 2 or loaded.shape[1] == 0:
        raise InvalidInputError(
            f"{path}: shape {loaded.shape}; expected ({len(lines)}, vocabulary size): one row per line of {SENTENCES}"
        )
    lines.check_count(path, loaded.shape[0])
    matrix = sp.csr_matrix(loaded)
    try:
        matrix.check_format(full_check=True)  # column indices within the width, row pointers in order
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not a well-formed sparse matrix ({exc})") from None
    with np.errstate(over="ignore"):
        matrix = matrix.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(matrix.data))
    if len(bad):
        row = int(np.searchsorted(matrix.indptr, bad[0], side="right")) - 1
        raise InvalidInputError(
            f"{lines.row(path, row)}: a value is not finite (NaN or infinite, or beyond float32's range); fix the "
            "encoding of that sentence"
        )
    matrix.sum_duplicates()  # a term given twice in a row is one term, its values added (and indices sorted)
    matrix.eliminate_zeros()
    return SparseTable(lines.index(), str(folder), read_similarity(folder, SPARSE), matrix)


def read_token_folder(folder: Path) -> TokenTable:
    """``folder/sentences.jsonl``, ``tokens.npy`` and ``token_offsets.npy``, checked against each
    other: offsets from 0 to the count of token rows, never decreasing, one more than the lines (a
    line of no token is allowed: MaxSim scores it as sentence-transformers does)."""
    lines = read_lines(folder, MULTI_VECTOR)
    tokens_path = folder / TOKENS
    tokens = load_array(tokens_path, "a float array")
    check_float_rows(tokens_path, tokens, "(tokens of all lines, dim)")
    offsets = _offsets(folder / TOKEN_OFFSETS, lines, len(tokens))

    def token_row(j: int) -> str:
        line = int(np.searchsorted(offsets, j, side="right")) - 1  # the line whose rows hold row j
        return f"{tokens_path}: row {j} (token {j - int(offsets[line])} of {lines.line(line)})"

    check_finite(tokens, token_row)
    return TokenTable(lines.index(), str(folder), read_similarity(folder, MULTI_VECTOR), tokens, offsets)


def _offsets(path: Path, lines: FolderLines, tokens: int) -> np.ndarray:
    offsets = load_array(path, "an integer array", mmap=False)
    if offsets.ndim != 1 or not np.issubdtype(offsets.dtype, np.integer):
        raise InvalidInputError(
            f"{path}: shape {offsets.shape} of {offsets.dtype}; expected int64 of shape ({len(lines) + 1},): "
            f"where each line's rows start in {TOKENS}, then where the last ends"
        )
    if len(offsets) != len(lines) + 1:
        raise InvalidInputError(
            f"{path}: {len(offsets):,} offsets for the {len(lines):,} lines of {lines.folder / SENTENCES}; save one "
            "more than the lines: where each line's rows start, then where the last ends"
        )
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0:
        raise InvalidInputError(f"{path}: starts at {offsets[0]}; the first line's rows start at 0")
    down = np.flatnonzero(np.diff(offsets) < 0)
    if len(down):
        i = int(down[0])
        raise InvalidInputError(
            f"{path}: offset {i + 1} ({offsets[i + 1]}) is below offset {i} ({offsets[i]}); offsets never decrease "
            f"(line {i + 1} of {SENTENCES} would end before it starts)"
        )
    if offsets[-1] != tokens:
        raise InvalidInputError(
            f"{path}: ends at {offsets[-1]:,}, but {TOKENS} has {tokens:,} rows; the last offset is the count of rows"
        )
    return offsets


def read_similarity(folder: Path, kind: str) -> str:
    """The similarity ``folder/similarity.json`` names for a model of ``kind``; its default when
    there is none."""
    allowed = SIMILARITIES[kind]
    path = folder / SIMILARITY
    if not path.exists():
        return allowed[0]
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise InvalidInputError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(settings, dict) or set(settings) != {"similarity"}:
        raise InvalidInputError(
            f'{path}: expected {{"similarity": ...}} with one of {", ".join(allowed)} for a {kind} model'
        )
    similarity = settings["similarity"]
    if similarity not in allowed:
        raise InvalidInputError(
            f"{path}: similarity {similarity!r}; a {kind} model's outputs are compared by {' or '.join(allowed)}"
        )
    return str(similarity)
