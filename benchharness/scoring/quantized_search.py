"""Retrieval over a corpus held at reduced precision, as the embedding-quantization practice
searches it (sentence-transformers' ``semantic_search_faiss``, vector databases' binary indexes).

A ``QuantizedCorpus`` holds the L2-normalised document vectors in one precision, and that is the
index's memory:

- ``float32``: the vectors (4 bytes a dimension); search by inner product, the exact cosine.
- ``int8``: per-dimension codes in 256 buckets between the corpus's minimum and maximum
  (``scoring.quantization.scalar_codes``, sentence-transformers' formula; 1 byte a
  dimension). Queries are coded with the corpus's ranges and a document scores the inner product
  of the two codes: integers, exact in float32 up to 1,024 dimensions (128 x 128 x 1,024 = 2^24).
- ``binary``: one bit a dimension, ``x > 0``, packed 8 to a byte; faiss's ``IndexBinaryFlat``
  ranks by Hamming distance to the query's bits.

``rescore=m`` is the practice's second pass: the quantized search fetches ``k * m`` candidates,
and each is scored again by the query's float vector against the document as the index holds it
(binary: its 0/1 bits; int8: its codes mapped back to bucket starts, ``start + (code + 128) * step``,
as sentence-transformers dequantizes), and the best ``k`` kept. Only the query is float: the corpus
never is, so memory stays the index's.

Every list follows the shared tie rule (score descending, then corpus order), the rescored ones
included, so results do not depend on how the corpus is cut into blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.scoring.quantization import bucket_starts, normalise, ranges_of, scalar_codes
from benchharness.scoring.top_k import top_k

SEARCH_PRECISIONS = ("float32", "int8", "binary")
#: what a quantized search scores a document by, as a result's protocol records it
SEARCHES = {
    "int8": "inner product of int8 codes of the L2-normalised vectors, calibrated on the corpus "
    "(sentence-transformers' buckets; exact search)",
    "binary": "minus the Hamming distance between the sign bits of the vectors (faiss IndexBinaryFlat, exact search)",
}


def describe(precision: str, rescore: int | None, depth: int) -> str:
    """What a quantized search of ``depth`` documents a query scores them by, as a result's protocol records it."""
    return SEARCHES[precision] + (f"; the best {depth} x {rescore} rescored by the float query" if rescore else "")


#: documents searched at a time (bounds the float copy of an int8 block)
BLOCK = 65_536
#: queries rescored at a time (bounds the candidates' unpacked vectors)
RESCORE_BLOCK = 256


@dataclass(frozen=True)
class QuantizedCorpus:
    """Document vectors at one precision: ``codes`` (float32, int8, or packed bits) and, for
    int8, the per-dimension ranges the codes were made with."""

    precision: str
    dimensions: int
    codes: np.ndarray
    ranges: np.ndarray | None = None

    @classmethod
    def build(
        cls, blocks: Callable[[], Iterable[np.ndarray]], precision: str, ranges: np.ndarray | None = None
    ) -> QuantizedCorpus:
        """The index of the float document rows that ``blocks()`` yields a block at a time (called
        twice for int8 without ``ranges``: once to calibrate, once to code), so that memory holds
        the codes and one float block, never the float corpus. int8 codes use ``ranges`` (shape
        (2, d): minimum and maximum of a calibration set) when given, else the corpus's own, as
        ``quantize_embeddings`` calibrates without them."""
        if precision not in SEARCH_PRECISIONS:
            raise InvalidInputError(f"search precision {precision!r}: choose among {', '.join(SEARCH_PRECISIONS)}")
        if precision == "int8" and ranges is None:
            lows, highs = zip(*((x.min(axis=0), x.max(axis=0)) for x in map(normalise, blocks())))
            ranges = ranges_of(np.vstack([np.min(lows, axis=0), np.max(highs, axis=0)]))
        codes, dimensions = [], 0
        for x in blocks():
            dimensions = x.shape[1]
            codes.append(_code(normalise(x), precision, ranges))
        if not codes:
            raise InvalidInputError("an empty corpus: nothing to index")
        dtype = {"float32": np.float32, "int8": np.int8, "binary": np.uint8}[precision]
        return cls(
            precision, dimensions, np.vstack(codes).astype(dtype, copy=False), ranges if precision == "int8" else None
        )

    @property
    def nbytes(self) -> int:
        """The memory the index's vectors take."""
        return int(self.codes.nbytes)

    def search(
        self, queries: np.ndarray, k: int, rescore: int | None = None, exclude: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each query's ``k`` best documents, as (scores, corpus ids), padded with -inf and -1 as
        ``top_k`` pads; with ``rescore=m``, the best ``k`` of ``k * m`` candidates rescored by the
        float query. ``exclude[i]`` never appears in query i's list."""
        if rescore is not None and (rescore < 1 or self.precision == "float32"):
            raise InvalidInputError(
                f"rescore={rescore}: a multiplier of at least 1, for an int8 or binary corpus (got {self.precision})"
            )
        x = normalise(queries)
        fetch = k * (rescore or 1)
        coded = _code(x, self.precision, self.ranges).astype(np.uint8 if self.precision == "binary" else np.float32)
        blocks = (self.codes[at : at + BLOCK].astype(np.float32, copy=False) for at in range(0, len(self.codes), BLOCK))
        scores, ids = top_k(coded, blocks, fetch, exclude=exclude, hamming=self.precision == "binary")
        if rescore is None:
            return scores, ids
        return self._rescore(x, ids, k)

    def _rescore(self, queries: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` of each row of ``candidates`` by the float query against the stored codes."""
        scores = np.full(candidates.shape, -np.inf, dtype=np.float32)
        for start in range(0, len(queries), RESCORE_BLOCK):
            ids = candidates[start : start + RESCORE_BLOCK]
            rows = self._as_float(self.codes[np.maximum(ids, 0)])
            block = np.einsum("qd,qkd->qk", queries[start : start + RESCORE_BLOCK], rows)
            scores[start : start + RESCORE_BLOCK] = np.where(ids >= 0, block, -np.inf)
        order = np.lexsort((np.where(candidates >= 0, candidates, np.iinfo(np.int64).max), -scores), axis=-1)[:, :k]
        return np.take_along_axis(scores, order, axis=1), np.take_along_axis(candidates, order, axis=1)

    def _as_float(self, codes: np.ndarray) -> np.ndarray:
        """Stored codes as the float vectors the rescoring multiplies: 0/1 bits, or bucket starts."""
        if self.precision == "binary":
            return np.unpackbits(codes, axis=-1)[..., : self.dimensions].astype(np.float32)
        assert self.ranges is not None
        return bucket_starts(codes, self.ranges, "int8")


def _code(x: np.ndarray, precision: str, ranges: np.ndarray | None) -> np.ndarray:
    """Normalised rows ``x`` in the corpus's precision."""
    if precision == "binary":
        return np.packbits(x > 0, axis=-1)
    if precision == "int8":
        assert ranges is not None
        return scalar_codes(x, ranges, "int8")
    return x
