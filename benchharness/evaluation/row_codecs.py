"""How one chunk of a kind's outputs is laid out in the embedding cache's ``vecs`` blob.

The cache (``evaluation.cache``) stores chunks of rows under sha1 keys with a crc32; it is the same
database for every kind of model, and only the bytes of a chunk's rows differ:

- ``DENSE_ROWS`` (format "1", the cache's own): ``n x width`` float32, row after row. A dense
  encoder's vectors; a cross-encoder's scores with width 1.
- ``SPARSE_ROWS`` ("sparse-1"): a sparse encoder's rows of ``width`` (its vocabulary) as CSR: ``n``
  int32 counts of active terms, then their int32 column indices, then their float32 values.
- ``TOKEN_ROWS`` ("tokens-1"): a multi-vector encoder's token matrices of ``width`` columns: ``n``
  int32 token counts, then every token vector's float32 values, item after item.

Each codec checks a blob's length against its header before reading it, so a damaged chunk is caught
as the dense one always was (and quarantined by the cache), never misread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError

_I32 = np.dtype("<i4")
_F32 = np.dtype("<f4")


class RowCodec(ABC):
    """Rows of one kind: how many, which are finite, a selection of them, and their bytes."""

    #: the cache's ``format`` for this layout; a cache of another format is never read with it
    format: str

    @abstractmethod
    def count(self, rows: Any) -> int: ...

    @abstractmethod
    def width(self, rows: Any) -> int: ...

    @abstractmethod
    def finite(self, rows: Any) -> np.ndarray:
        """One bool per row: whether all its values are finite (a NaN stored once is served forever)."""

    @abstractmethod
    def take(self, rows: Any, positions: Sequence[int] | np.ndarray) -> Any: ...

    @abstractmethod
    def concat(self, parts: Sequence[Any], width: int) -> Any: ...

    @abstractmethod
    def pack(self, rows: Any) -> bytes: ...

    @abstractmethod
    def unpack(self, blob: bytes, n: int, width: int) -> Any:
        """The rows a blob holds; ValueError when its length does not match its header."""

    def checked_unpack(self, blob: bytes, n: int, width: int | None) -> Any | None:
        """The rows ``blob`` holds, or None when its length does not match its ``n`` rows of ``width``
        (read once: the check is the unpacking)."""
        try:
            return self.unpack(blob, n, width or 0)
        except ValueError:
            return None

    def empty(self, width: int) -> Any:
        return self.concat([], width)

    def checked(self, rows: Any, n: int, where: str, width: int | None) -> Any:
        """``rows`` when they are ``n`` finite rows of ``width`` (the stored one, if any); else one line."""
        if self.count(rows) != n:
            raise InvalidInputError(f"{where}: expected {n} rows, got {self.count(rows)}")
        bad = ~self.finite(rows)
        if bad.any():
            raise InvalidInputError(
                f"{where}: {int(bad.sum())} of {n} rows are not finite "
                f"(first at position {int(np.argmax(bad))}); they are not cached"
            )
        if width is not None and n and self.width(rows) != width:
            raise InvalidInputError(
                f"{where}: rows have dimension {self.width(rows)}, the cache holds dimension {width}"
            )
        return rows

    def merged(self, chunks: Sequence[tuple[int, bytes]], width: int, size: int) -> Iterator[tuple[int, bytes]]:
        """Chunks ``(n, blob)`` joined and cut again into chunks of at most ``size`` rows."""
        rows = self.concat([self.unpack(blob, n, width) for n, blob in chunks], width)
        total = self.count(rows)
        for start in range(0, total, size):
            part = self.take(rows, np.arange(start, min(start + size, total)))
            yield self.count(part), self.pack(part)


class DenseRows(RowCodec):
    """A float32 matrix, one row per item."""

    format = "1"

    def count(self, rows: np.ndarray) -> int:
        return len(rows)

    def width(self, rows: np.ndarray) -> int:
        return int(rows.shape[1])

    def finite(self, rows: np.ndarray) -> np.ndarray:
        return np.isfinite(rows).all(axis=1)

    def take(self, rows: np.ndarray, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        return rows[np.asarray(positions, dtype=np.intp)]

    def concat(self, parts: Sequence[np.ndarray], width: int) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros((0, width), dtype=np.float32)

    def pack(self, rows: np.ndarray) -> bytes:
        return np.ascontiguousarray(rows, dtype=_F32).tobytes()

    def unpack(self, blob: bytes, n: int, width: int) -> np.ndarray:
        if len(blob) != n * width * 4:
            raise ValueError(f"{len(blob)} bytes for {n} rows of {width}")
        return np.frombuffer(blob, dtype=np.float32).reshape(n, width)

    def checked(self, rows: Any, n: int, where: str, width: int | None) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.float32)
        if rows.ndim != 2 or len(rows) != n:
            raise InvalidInputError(f"{where}: expected {n} rows, got an array of shape {rows.shape}")
        return super().checked(rows, n, where, width)

    def merged(self, chunks: Sequence[tuple[int, bytes]], width: int, size: int) -> Iterator[tuple[int, bytes]]:
        # fixed-size rows: the blobs are cut by bytes, with no copy through arrays
        blob = b"".join(b for _, b in chunks)
        n = sum(c for c, _ in chunks)
        row = len(blob) // n if n else 0
        for start in range(0, n, size):
            part = blob[start * row : (start + size) * row]
            yield len(part) // row, part


class SparseRows(RowCodec):
    """A ``scipy.sparse.csr_matrix`` of float32, one row per item, ``width`` columns."""

    format = "sparse-1"

    def count(self, rows: Any) -> int:
        return int(rows.shape[0])

    def width(self, rows: Any) -> int:
        return int(rows.shape[1])

    def finite(self, rows: Any) -> np.ndarray:
        row_of_value = np.repeat(np.arange(self.count(rows)), np.diff(rows.indptr))
        ok = np.ones(self.count(rows), dtype=bool)
        ok[row_of_value[~np.isfinite(rows.data)]] = False
        return ok

    def take(self, rows: Any, positions: Sequence[int] | np.ndarray) -> Any:
        return rows[np.asarray(positions, dtype=np.intp)]

    def concat(self, parts: Sequence[Any], width: int) -> Any:
        import scipy.sparse as sp

        if not parts:
            return sp.csr_matrix((0, width), dtype=np.float32)
        return sp.vstack(parts, format="csr", dtype=np.float32)

    def pack(self, rows: Any) -> bytes:
        rows = rows.tocsr()
        rows.sum_duplicates()
        counts = np.diff(rows.indptr).astype(_I32)
        return counts.tobytes() + rows.indices.astype(_I32).tobytes() + rows.data.astype(_F32).tobytes()

    def unpack(self, blob: bytes, n: int, width: int) -> Any:
        import scipy.sparse as sp

        if len(blob) < 4 * n:
            raise ValueError(f"{len(blob)} bytes cannot hold {n} row counts")
        counts = np.frombuffer(blob, dtype=_I32, count=n)
        nnz = int(counts.sum())
        if (counts < 0).any() or len(blob) != 4 * n + 8 * nnz:
            raise ValueError(f"{len(blob)} bytes for {n} rows holding {nnz} values")
        indices = np.frombuffer(blob, dtype=_I32, count=nnz, offset=4 * n)
        if nnz and (indices.min() < 0 or indices.max() >= width):
            raise ValueError(f"a column index outside 0..{width - 1}")
        data = np.frombuffer(blob, dtype=_F32, count=nnz, offset=4 * n + 4 * nnz)
        indptr = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        return sp.csr_matrix((data, indices, indptr), shape=(n, width))


class TokenRows(RowCodec):
    """A list of float32 matrices (tokens x ``width``), one per item."""

    format = "tokens-1"

    def count(self, rows: Sequence[np.ndarray]) -> int:
        return len(rows)

    def width(self, rows: Sequence[np.ndarray]) -> int:
        return int(rows[0].shape[1]) if len(rows) else 0

    def finite(self, rows: Sequence[np.ndarray]) -> np.ndarray:
        return np.fromiter((bool(np.isfinite(r).all()) for r in rows), dtype=bool, count=len(rows))

    def take(self, rows: Sequence[np.ndarray], positions: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        return [rows[int(i)] for i in positions]

    def concat(self, parts: Sequence[Sequence[np.ndarray]], width: int) -> list[np.ndarray]:
        return [r for part in parts for r in part]

    def checked(self, rows: Any, n: int, where: str, width: int | None) -> list[np.ndarray]:
        rows = [np.asarray(r, dtype=np.float32) for r in rows]
        if any(r.ndim != 2 for r in rows) or len({r.shape[1] for r in rows}) > 1:
            raise InvalidInputError(f"{where}: every item must be one (tokens x dimension) matrix of one dimension")
        return super().checked(rows, n, where, width)

    def pack(self, rows: Sequence[np.ndarray]) -> bytes:
        counts = np.fromiter((len(r) for r in rows), dtype=_I32, count=len(rows))
        return counts.tobytes() + b"".join(np.ascontiguousarray(r, dtype=_F32).tobytes() for r in rows)

    def unpack(self, blob: bytes, n: int, width: int) -> list[np.ndarray]:
        if len(blob) < 4 * n:
            raise ValueError(f"{len(blob)} bytes cannot hold {n} token counts")
        counts = np.frombuffer(blob, dtype=_I32, count=n)
        tokens = int(counts.sum())
        if (counts < 0).any() or len(blob) != 4 * n + 4 * tokens * width:
            raise ValueError(f"{len(blob)} bytes for {n} items of {tokens} tokens of {width}")
        values = np.frombuffer(blob, dtype=_F32, count=tokens * width, offset=4 * n).reshape(tokens, width)
        edges = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        return [values[a:b] for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]


DENSE_ROWS: RowCodec = DenseRows()
SPARSE_ROWS: RowCodec = SparseRows()
TOKEN_ROWS: RowCodec = TokenRows()
