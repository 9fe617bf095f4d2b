"""Exact top-k search over a corpus that arrives a block of documents at a time.

Each block is searched with a faiss ``IndexFlatIP`` (exact inner products; ``IndexBinaryFlat``,
exact Hamming distances, for packed binary codes) and its best hits are merged into the
running top-k lists, so memory holds the queries, one block of documents and the lists, never the
corpus or a query x corpus score matrix. Ties follow ``benchharness.scoring.ranking``'s rule: score
descending, then corpus order; the merge sorts by exactly that key, so the lists do not depend on
how the corpus is cut into blocks (a block's dot products are the same numbers faiss computes for
the whole corpus: the reduction runs over the dimension, not over documents).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from benchharness.core.errors import UserError

#: queries searched against a block at a time (bounds the lists a faiss call returns). On 2 AVX2
#: cores, 5,000 queries against 2M 50-dimensional documents took 81.5 s at 1,024 a call and 21.6 s
#: at 8,192, one faiss search of the whole corpus 21.3 s (one run, started at load 1.6: indicative;
#: benchmarks/quantized_search.py's float search, idle, 23.9 s); at 384 dimensions it hardly matters.
#: BLAS picks its kernel by the call's shape, so a score may differ from another block size's in the
#: last bits: the size is fixed here, and a list never depends on how the corpus is cut.
QUERY_BLOCK = 8192
#: corpus documents embedded and searched at a time: memory holds one block, not the corpus
DOC_BLOCK = 65_536
_NO_ID = np.iinfo(np.int64).max  # sorts after every real id


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows of unit length, float32 and contiguous (faiss's input); a zero row stays zero, so that it
    scores 0 against everything, as cosine with a zero vector does throughout the harness."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def top_k(
    queries: np.ndarray,
    doc_blocks: Iterable[np.ndarray],
    k: int,
    exclude: np.ndarray | None = None,
    query_block: int = QUERY_BLOCK,
    hamming: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and corpus ids (offsets over the blocks, in order) of each query's ``k`` best
    documents; ``exclude[i]`` (a corpus id or -1) never appears in query i's list. Lists shorter
    than ``k`` are padded with id -1 and score -inf.

    Inner products of float32 rows by default; with ``hamming``, rows are bits packed 8 to a byte
    (``np.packbits``) searched by a faiss ``IndexBinaryFlat``, and a document's score is minus its
    Hamming distance to the query (an integer: every tie is exact, and broken by corpus order)."""
    import faiss

    dtype = np.uint8 if hamming else np.float32
    queries = np.ascontiguousarray(queries, dtype=dtype)
    n = len(queries)
    best_s, best_i = padded_lists(n, k=0)
    offset = 0
    for docs in doc_blocks:
        docs = np.ascontiguousarray(docs, dtype=dtype)
        if not len(docs):
            continue
        index = faiss.IndexBinaryFlat(8 * docs.shape[1]) if hamming else faiss.IndexFlatIP(docs.shape[1])
        index.add(docs)
        fetch = min(k + (exclude is not None), len(docs))  # one more, in case it is the excluded one
        s = np.empty((n, fetch), dtype=np.float32)
        i = np.empty((n, fetch), dtype=np.int64)
        for start in range(0, n, query_block):
            found, i[start : start + query_block] = index.search(queries[start : start + query_block], fetch)
            s[start : start + query_block] = -found if hamming else found
        i = np.where(i >= 0, i + offset, -1)
        best_s, best_i = merge_lists(np.hstack([best_s, s]), np.hstack([best_i, i]), k, exclude)
        offset += len(docs)
    return padded_lists(n, k, best_s, best_i)


def padded_lists(
    n: int, k: int, scores: np.ndarray | None = None, ids: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` queries' running top lists (float32 scores, int64 ids; none: no columns yet, before any
    document is merged) widened to ``k`` columns with id -1 and score -inf, as the lists of a corpus
    smaller than ``k`` end."""
    if scores is None or ids is None:
        scores, ids = np.zeros((n, 0), np.float32), np.zeros((n, 0), np.int64)
    pad = max(0, k - scores.shape[1])
    no_scores, no_ids = np.full((n, pad), -np.inf, np.float32), np.full((n, pad), -1, np.int64)
    return np.hstack([scores, no_scores]), np.hstack([ids, no_ids])


def merge_lists(
    scores: np.ndarray, ids: np.ndarray, k: int, exclude: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``k`` candidates by (score desc, id asc); missing and excluded ids drop out."""
    invalid = ids < 0
    if exclude is not None:
        invalid |= ids == np.asarray(exclude, dtype=np.int64)[:, None]
    scores = np.where(invalid, -np.inf, scores)
    ids = np.where(invalid, _NO_ID, ids)
    order = np.lexsort((ids, -scores), axis=-1)[:, :k]
    top_s = np.take_along_axis(scores, order, axis=1)
    top_i = np.take_along_axis(ids, order, axis=1)
    return top_s, np.where(top_i == _NO_ID, -1, top_i)


class ConstantScoresError(UserError):
    """Every list scores all its documents alike: its order would be the corpus order, not the
    encoder's, and any metric computed from it a number about the file."""


def exact_ties(scores: np.ndarray) -> int:
    """Adjacent equal scores within the lists (padding left out): the places where the tie rule,
    not the encoder, decides the order."""
    scores = np.asarray(scores)
    finite = np.isfinite(scores[:, 1:]) & np.isfinite(scores[:, :-1])
    return int(((scores[:, 1:] == scores[:, :-1]) & finite).sum())


#: scores closer than this are one score for ``refuse_constant``: the same vector encoded in another
#: row of a batch can come out a few float32 units apart
CONSTANT_ATOL = 1e-5


def refuse_constant(scores: np.ndarray, what: str) -> None:
    """Raise ``ConstantScoresError`` when every list of two or more documents holds one score
    throughout, within ``CONSTANT_ATOL`` (every document the same vector, or a prompt that leaves no
    room for the text)."""
    scores = np.asarray(scores)
    finite = np.isfinite(scores)
    rows = [row[ok] for row, ok in zip(scores, finite) if ok.sum() >= 2]
    if rows and all(np.abs(row - row[0]).max() <= CONSTANT_ATOL for row in rows):
        raise ConstantScoresError(
            f"{what}: every query scores all its top documents alike ({rows[0][0]:.6g}): the ranking would "
            "be the corpus order, so no score is given; is every document encoded to the same vector "
            "(a prompt longer than max_length, a broken encoder)?"
        )
