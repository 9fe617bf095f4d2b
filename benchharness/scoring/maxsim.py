"""Late-interaction scoring (ColBERT's MaxSim) over token vectors, exactly and in bounded memory.

A multi-vector model gives each text a matrix, one row per token. A query scores a document by
summing, over the query's tokens, each token's largest dot product with any of the document's
tokens (MaxSim); a model trained so divides that sum by the query's token count (mean-MaxSim,
sentence-transformers' ``meanmaxsim``). This is ``sentence_transformers.util.similarity.maxsim``
and ``maxsim_pairwise`` on ragged lists, with their edge cases: a query of no token scores 0 and
counts as one token when normalised; a document of no token scores ``EMPTY_DOCUMENT`` (before the
normalisation), below every real document; scores are float32 sums of float32 maxima.

Search is exact: each query is scored against every document. The corpus is encoded and scored a
block of documents at a time, and each block is dropped once its best documents are merged into
the running lists, so memory holds the queries' token vectors, one block's and the lists, never
the corpus's. Of the memory bound (``ViewSettings.memory_mib``), a block's token vectors take at
most a quarter (they are held twice while they are stacked into one matrix) and the scoring of a
chunk of queries against the block at most a half (the similarities of its tokens with the
block's, their maxima per document, its scores). A block's length in documents is set from the
largest document seen so far (the first block is ``PROBE`` documents, whose sizes are not known
before they are encoded), so a block keeps to its quarter unless it holds a document longer than
every one before it. Ties follow ``scoring.top_k``: score descending, then corpus order, merged
by the same function, so the order never depends on where the corpus is cut. A score itself may
differ in its last bit from one computed in blocks of another size (BLAS picks its kernel by the
shape of the product, as ``scoring.top_k.QUERY_BLOCK`` says), as sentence-transformers' own
float32 scores differ with its chunk budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import MULTI_VECTOR, Ranked, Roles, View
from benchharness.core.prompts import Role
from benchharness.scoring.top_k import merge_lists, padded_lists

#: a text's token vectors, one float32 matrix (tokens x dimension) per text, as encoded for a role
EncodeTokens = Callable[[list[str], Role], list[np.ndarray]]

MIB = 1 << 20
#: texts in the first block, before any text's size is known (one encoding batch of most models)
PROBE = 32
#: the score of a document with no token (sentence-transformers' ``_EMPTY_DOCUMENT_SCORE``)
EMPTY_DOCUMENT = -1e9
_F32 = 4  # bytes of a float32
#: bytes per query and document of a chunk's scores and their partial sort (float32 sums and scores,
#: their negation, int64 positions), beside the similarities and maxima counted per token
_SORT_BYTES = 24


@dataclass(frozen=True)
class Tokens:
    """Texts' token vectors stacked into one matrix: ``vectors`` (all tokens x dimension, float32)
    and each text's token count, in order."""

    vectors: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, matrices: Sequence[np.ndarray], dimension: int) -> Tokens:
        lengths = np.array([len(m) for m in matrices], dtype=np.int64)
        vectors = np.concatenate(matrices) if len(matrices) else np.zeros((0, dimension), np.float32)
        return cls(np.ascontiguousarray(vectors, dtype=np.float32), lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.intp)

    def texts(self, first: int, stop: int) -> Tokens:
        """Texts ``first`` to ``stop`` (a view: no vector is copied)."""
        rows = self.starts[first] if first < len(self) else len(self.vectors)
        end = rows + int(self.lengths[first:stop].sum())
        return Tokens(self.vectors[rows:end], self.lengths[first:stop])


def maxsim(query: np.ndarray, document: np.ndarray, normalise: bool = False) -> float:
    """The MaxSim of one query's token vectors against one document's (mean-MaxSim with ``normalise``)."""
    if not len(document):
        score = np.float32(EMPTY_DOCUMENT)
    elif not len(query):
        score = np.float32(0.0)
    else:
        score = (document @ query.T).max(axis=0).sum(dtype=np.float32)
    return float(score / np.float32(max(len(query), 1)) if normalise else score)


def maxsim_matrix(queries: Tokens, documents: Tokens, normalise: bool = False) -> np.ndarray:
    """MaxSim (mean-MaxSim with ``normalise``) of every query against every document, float32
    (queries x documents): one product of the stacked token vectors, its maxima per document, their
    sums per query."""
    scores = np.zeros((len(queries), len(documents)), dtype=np.float32)
    q_real, d_real = queries.lengths > 0, documents.lengths > 0
    if q_real.any() and d_real.any():
        # a text of no token has no row: the others' segments cover the stacked rows. Query tokens
        # by rows: numpy's reduceat is fast along a row and slow across rows of a wide matrix
        best = np.maximum.reduceat(queries.vectors @ documents.vectors.T, documents.starts[d_real], axis=1)
        scores[np.ix_(q_real, d_real)] = np.add.reduceat(best, queries.starts[q_real], axis=0)
    scores[:, ~d_real] = EMPTY_DOCUMENT
    if normalise:
        scores /= np.maximum(queries.lengths, 1).astype(np.float32)[:, None]
    return scores


class _Sizer:
    """How many texts the next block takes so that its token vectors fit ``budget`` bytes: as many
    as the largest text seen so far allows, ``PROBE`` before any is seen."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.largest = 0

    def next(self) -> int:
        return PROBE if not self.largest else max(1, int(self.budget // self.largest))

    def saw(self, sizes: Iterable[int]) -> None:
        self.largest = max(self.largest, *sizes, 1)


@dataclass
class _Counts:
    """What the last search encoded: tokens of the corpus and of the queries, and their width."""

    documents: int = 0
    document_tokens: int = 0
    queries: int = 0
    query_tokens: int = 0
    dimension: int = 0


class MultiVectorView(View):
    """A multi-vector model as a task sees it: ``pairs`` and ``search`` by MaxSim over the token
    vectors ``encode(sentences, role)`` gives (mean-MaxSim when ``length_normalized``), in blocks
    within ``memory_mib``; ``facts`` says what the corpus's token vectors take."""

    kind = MULTI_VECTOR

    def __init__(self, encode: EncodeTokens, length_normalized: bool = False, memory_mib: float = 1024.0) -> None:
        self._encode = encode
        self.length_normalized = length_normalized
        self.memory = float(memory_mib) * MIB
        self._counts: _Counts | None = None
        #: texts per block of the last search, in order (what the memory bound decided)
        self.blocks: list[int] = []

    def tokens(self, sentences: Sequence[str], role: Role) -> list[np.ndarray]:
        """The token vectors of ``sentences`` for ``role``, checked: one float32 matrix per sentence,
        all of one dimension."""
        out = self._encode(list(sentences), role)
        if len(out) != len(sentences):
            raise InvalidInputError(f"the model gave {len(out)} token matrices for {len(sentences)} texts")
        matrices = [np.asarray(m, dtype=np.float32) for m in out]
        if any(m.ndim != 2 for m in matrices) or len({m.shape[1] for m in matrices}) > 1:
            shapes = ", ".join(str(s) for s in list(dict.fromkeys(m.shape for m in matrices))[:3])
            raise InvalidInputError(
                f"the model's token vectors must be one (tokens x dimension) matrix per text, all of one "
                f"dimension; got shapes {shapes}"
            )
        return matrices

    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles) -> np.ndarray:
        """MaxSim of ``left[i]``'s tokens (the query side) against ``right[i]``'s, a block of pairs at
        a time within a quarter of the bound, each distinct text of a block encoded once."""
        scores = np.empty(len(left), dtype=np.float64)
        sizer = _Sizer(self.memory / 4)
        start = 0
        while start < len(left):
            stop = min(len(left), start + sizer.next())
            firsts = list(dict.fromkeys(left[start:stop]))
            seconds = list(dict.fromkeys(right[start:stop]))
            a = dict(zip(firsts, self.tokens(firsts, roles[0])))
            b = dict(zip(seconds, self.tokens(seconds, roles[1])))
            for i in range(start, stop):
                scores[i] = maxsim(a[left[i]], b[right[i]], self.length_normalized)
            sizer.saw(a[left[i]].nbytes + b[right[i]].nbytes for i in range(start, stop))
            start = stop
        return scores

    def _search(self, queries: Sequence[str], corpus: Sequence[str], k: int, roles: Roles, exclude: Any) -> Ranked:
        listed = self.tokens(queries, roles[0])
        counts = _Counts(queries=len(listed), query_tokens=sum(len(q) for q in listed))
        counts.dimension = listed[0].shape[1] if listed else 0
        query_tokens = Tokens.of(listed, counts.dimension)
        del listed
        n = len(query_tokens)
        best_s, best_i = padded_lists(n, k=0)
        sizer = _Sizer(self.memory / 4)
        self.blocks = []
        start = 0
        while start < len(corpus):
            stop = min(len(corpus), start + sizer.next())
            matrices = self.tokens(corpus[start:stop], roles[1])
            sizer.saw(m.nbytes for m in matrices)
            counts.dimension = counts.dimension or matrices[0].shape[1]
            block = Tokens.of(matrices, counts.dimension)
            del matrices
            self.blocks.append(len(block))
            counts.documents += len(block)
            counts.document_tokens += len(block.vectors)
            if n:
                best_s, best_i = self._merge_block(query_tokens, block, start, k, exclude, best_s, best_i)
            del block  # dropped before the next block is encoded
            start = stop
        self._counts = counts
        return padded_lists(n, k, best_s, best_i)

    def _merge_block(
        self,
        queries: Tokens,
        block: Tokens,
        offset: int,
        k: int,
        exclude: np.ndarray | None,
        best_s: np.ndarray,
        best_i: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The running lists with one block's documents merged in, the queries scored a chunk at a
        time within half the bound (a chunk holds one query at least)."""
        per_token = _F32 * (len(block.vectors) + len(block))  # similarities and their maxima per document
        costs = per_token * queries.lengths + _SORT_BYTES * len(block)
        fetch = k + (exclude is not None)  # one more, in case it is the excluded one
        merged = []
        for first, stop in _chunks(costs, self.memory / 2):
            scores = maxsim_matrix(queries.texts(first, stop), block, self.length_normalized)
            top_s, top_i = _block_top(scores, offset, fetch)
            merged.append(
                merge_lists(
                    np.hstack([best_s[first:stop], top_s]),
                    np.hstack([best_i[first:stop], top_i]),
                    k,
                    None if exclude is None else np.asarray(exclude)[first:stop],
                )
            )
        return np.vstack([s for s, _ in merged]), np.vstack([i for _, i in merged])

    def facts(self) -> dict[str, float | int]:
        """For the corpus last searched: the bytes its token vectors take as float32 (``index_bytes``:
        4 x tokens x dimension, summed over the corpus; ``bytes_per_document``: its mean), the mean
        tokens of a document and of a query, and the vectors' dimension. Nothing before a search."""
        c = self._counts
        if c is None:
            return {}
        index_bytes = _F32 * c.document_tokens * c.dimension
        return {
            "index_bytes": index_bytes,
            "bytes_per_document": index_bytes / max(c.documents, 1),
            "tokens_per_document": c.document_tokens / max(c.documents, 1),
            "tokens_per_query": c.query_tokens / max(c.queries, 1),
            "token_dimension": c.dimension,
        }


def _chunks(costs: np.ndarray, room: float) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of positions whose costs sum to at most ``room`` (one position at least)."""
    start, used = 0, 0.0
    for i, cost in enumerate(costs.tolist()):
        if i > start and used + cost > room:
            yield start, i
            start, used = i, 0.0
        used += cost
    if start < len(costs):
        yield start, len(costs)


def _block_top(scores: np.ndarray, offset: int, fetch: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``fetch`` best documents of a block by (score desc, corpus order), with their
    corpus ids (``offset`` + position): every candidate the merge can keep, whichever of several
    documents tied at the cut a partial sort would have picked."""
    n = scores.shape[1]
    if n <= fetch:
        return scores, np.broadcast_to(np.arange(offset, offset + n, dtype=np.int64), scores.shape).copy()
    part = np.argpartition(-scores, fetch - 1, axis=1)[:, :fetch]
    top = np.take_along_axis(scores, part, axis=1)
    cut = top.min(axis=1, keepdims=True)
    for r in np.flatnonzero((scores >= cut).sum(axis=1) > fetch):  # more documents at the cut than places
        part[r] = np.lexsort((np.arange(n), -scores[r]))[:fetch]
        top[r] = scores[r, part[r]]
    return top, part.astype(np.int64) + offset
