"""The view of a sparse encoder (SPLADE): one vocabulary-sized vector per text with few active terms,
scored by the model's similarity (dot product for SPLADE, cosine when the model says so).

The view is handed a plain function ``encode(sentences, role) -> scipy.sparse.csr_matrix`` (the kind
plugin routes it through the cache), so it scores any sparse model, and a test's hand-made rows.

Search is exact and never densifies the corpus: the corpus is encoded a block of ``DOC_BLOCK``
documents at a time, each block is scored against a block of queries by a sparse product
(``queries @ block.T``: only the terms a query and a document share are multiplied), the block's
scores (queries x block documents, bounded by the view's memory) are cut to each query's best, and
merged into the running lists by ``scoring.top_k``'s merge, so ties follow the shared rule (score
descending, then corpus order) and the lists do not depend on how the corpus is cut: a document's
score is the same sum, over the query's terms in order, whatever block it is in.

``facts`` reports what sentence-transformers' sparse evaluators report, under their names, for what
the view scored: ``query_active_dims``, ``query_sparsity_ratio``, ``corpus_active_dims``,
``corpus_sparsity_ratio`` and ``avg_flops`` as ``SparseInformationRetrievalEvaluator`` computes them
(the mean count of active terms per row; one minus its share of the vocabulary; the dot product of
the query side's and the corpus side's mean "is this term active" vectors, the expected number of
multiplications a query costs per document); for a reranking task's pairs, each query once however
many candidates it is paired with, as ``SparseRerankingEvaluator`` counts it; for a symmetric task
(STS) ``active_dims`` and ``sparsity_ratio`` of every text scored, as
``SparseEmbeddingSimilarityEvaluator``'s; and, after a search, the bytes of the corpus as one CSR
matrix (``index_bytes``: values, column indices and row pointers) and ``bytes_per_document``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import SPARSE, Ranked, Roles, View
from benchharness.core.prompts import Role
from benchharness.scoring.top_k import DOC_BLOCK, merge_lists

#: the similarities a sparse model may name (``SparseEncoder.similarity_fn_name``) that the view computes
SIMILARITIES = ("dot", "cosine")
#: bytes one (query, document) score takes while a block is cut to the best: the float32 score and
#: the masks and ranks of the cut (``_block_best``)
_BYTES_PER_SCORE = 16

#: a function from texts and the role they are encoded for to one CSR row per text
SparseEncode = Callable[[list[str], Role], Any]


@dataclass
class _Side:
    """The rows scored on one side (queries, corpus, or both of a symmetric task): how many, how
    many terms they hold, and in how many rows each term is active."""

    rows: int = 0
    active: int = 0
    counts: np.ndarray | None = None

    def add(self, matrix: Any) -> None:
        self.rows += matrix.shape[0]
        self.active += matrix.nnz
        seen = np.bincount(matrix.indices, minlength=matrix.shape[1])
        self.counts = seen if self.counts is None else self.counts + seen


class SparseView(View):
    """Pairs and exact search by a sparse model's similarity, from ``encode(sentences, role)``.

    ``similarity``: "dot" (SPLADE's) or "cosine"; ``memory_mib`` bounds a block of scores
    (queries x ``doc_block`` documents); ``doc_block``: documents encoded and scored at a time."""

    kind = SPARSE

    def __init__(
        self, encode: SparseEncode, similarity: str = "dot", memory_mib: float = 1024.0, doc_block: int = DOC_BLOCK
    ) -> None:
        if similarity not in SIMILARITIES:
            raise InvalidInputError(
                f"a sparse model's similarity {similarity!r} is not computed here; benchharness scores sparse "
                f"vectors by {' or '.join(SIMILARITIES)}"
            )
        self._encode = encode
        self.similarity = similarity
        self._score_budget = max(1, int(memory_mib * 2**20) // _BYTES_PER_SCORE)
        self._doc_block = int(doc_block)
        self._sides: dict[str, _Side] = {}
        self._width = 0
        self._index: tuple[int, int] | None = None  # (bytes, documents) of the last corpus searched

    def rows(self, sentences: Sequence[str], role: Role, counted: np.ndarray | None = None) -> Any:
        """The CSR rows of ``sentences`` for ``role``, float32 without stored zeros, and unit-length
        when the similarity is cosine (a zero row stays zero); the facts count them all, or the rows
        at the positions ``counted``."""
        import scipy.sparse as sp

        matrix = sp.csr_matrix(self._encode(list(sentences), role), dtype=np.float32)
        if matrix.shape[0] != len(sentences):
            raise InvalidInputError(f"the sparse model returned {matrix.shape[0]} rows for {len(sentences)} texts")
        if not np.isfinite(matrix.data).all():
            raise InvalidInputError(f"the sparse model returned NaN or infinite values for {len(sentences)} texts")
        matrix.eliminate_zeros()
        matrix.sort_indices()
        self._width = max(self._width, matrix.shape[1])
        self._sides.setdefault(_side(role), _Side()).add(matrix if counted is None else matrix[counted])
        if self.similarity == "cosine":
            norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1), dtype=np.float64).ravel())
            matrix = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ matrix, dtype=np.float32)
        return matrix

    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles) -> np.ndarray:
        # a query paired with each of its candidates (reranking) is counted once, as sentence-transformers'
        # reranking evaluators encode a sample's query once; a symmetric task's texts as they are listed
        queries = roles[0].name == "query"
        a = self.rows(left, roles[0], _runs(left) if queries else None)
        b = self.rows(right, roles[1])
        return np.asarray(a.multiply(b).sum(axis=1, dtype=np.float64)).ravel()

    def _search(self, queries: Sequence[str], corpus: Sequence[str], k: int, roles: Roles, exclude: Any) -> Ranked:
        query_rows = self.rows(queries, roles[0])
        n = query_rows.shape[0]
        best_s = np.full((n, k), -np.inf, dtype=np.float32)  # padding: merged away by any real hit
        best_i = np.full((n, k), -1, dtype=np.int64)
        fetch = k + (exclude is not None)  # one more, in case it is the excluded one
        query_block = max(1, self._score_budget // max(1, min(self._doc_block, len(corpus))))
        index_bytes = 0
        for start in range(0, len(corpus), self._doc_block):
            docs = self.rows(corpus[start : start + self._doc_block], roles[1])
            # the corpus as one CSR matrix: its values, column indices and a row pointer per document
            index_bytes += docs.data.nbytes + docs.indices.nbytes + docs.indptr.itemsize * docs.shape[0]
            if not n:
                continue
            docs_t = docs.T.tocsr()
            for q in range(0, n, query_block):
                rows = slice(q, q + query_block)
                s, i = _block_best((query_rows[rows] @ docs_t).toarray(), fetch)
                held = None if exclude is None else exclude[rows]
                best_s[rows], best_i[rows] = merge_lists(
                    np.hstack([best_s[rows], s]), np.hstack([best_i[rows], i + start]), k, held
                )
        if len(corpus):
            self._index = (index_bytes + docs.indptr.itemsize, len(corpus))  # and the pointer past the last row
        return best_s, best_i

    def facts(self) -> dict[str, float | int]:
        """sentence-transformers' sparsity figures for what was scored (see the module docstring)."""
        facts: dict[str, float | int] = {}
        for name, side in self._sides.items():
            prefix = f"{name}_" if name else ""
            active = side.active / side.rows if side.rows else 0.0
            facts[f"{prefix}active_dims"] = active
            facts[f"{prefix}sparsity_ratio"] = 1.0 - active / self._width if self._width else 1.0
        query, corpus = self._sides.get("query"), self._sides.get("corpus")
        if query and corpus and query.rows and corpus.rows:
            assert query.counts is not None and corpus.counts is not None
            width = max(len(query.counts), len(corpus.counts))
            mean_q = np.pad(query.counts, (0, width - len(query.counts))) / query.rows
            mean_c = np.pad(corpus.counts, (0, width - len(corpus.counts))) / corpus.rows
            facts["avg_flops"] = float(mean_q @ mean_c)
        if self._index is not None:
            index_bytes, documents = self._index
            facts["index_bytes"] = index_bytes
            facts["bytes_per_document"] = index_bytes / documents
        return facts


def _side(role: Role) -> str:
    """The name sentence-transformers gives the side a role is on: queries, the corpus, or ""
    for the texts of a symmetric task."""
    return {"query": "query", "document": "corpus"}.get(role.name or "", "")


def _runs(texts: Sequence[str]) -> np.ndarray:
    """The positions where a run of equal consecutive texts starts."""
    return np.array([i for i, text in enumerate(texts) if i == 0 or text != texts[i - 1]], dtype=np.intp)


def _block_best(scores: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``fetch`` columns of a dense block of scores by (score desc, column asc), in
    no particular order (``merge_lists`` orders them): every column above the row's ``fetch``-th score,
    then as many of those equal to it as fit, the first ones, so that a tie at the cut goes to the
    earlier document, as the shared rule says."""
    n, width = scores.shape
    if width <= fetch:
        return scores.astype(np.float32, copy=False), np.broadcast_to(np.arange(width, dtype=np.int64), (n, width))
    cut = np.partition(scores, width - fetch, axis=1)[:, width - fetch][:, None]
    above = scores > cut
    room = fetch - above.sum(axis=1, dtype=np.int32)[:, None]
    at_cut = scores == cut
    keep = above | (at_cut & (np.cumsum(at_cut, axis=1, dtype=np.int32) <= room))
    columns = np.nonzero(keep)[1].reshape(n, fetch)  # row-major: each row's kept columns, in order
    return np.take_along_axis(scores, columns, axis=1).astype(np.float32, copy=False), columns.astype(np.int64)
