"""The sparse view's exact search and pair scores against numpy on the dense matrices: small random
sparse rows of small integer values, so that every score is exact in float32 and ties are many (the
tie rule, score descending then corpus order, decides much of each list), and the figures it
reports against their definitions in sentence-transformers' ``SparseInformationRetrievalEvaluator``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY
from benchharness.scoring.sparse import SparseView

WIDTH = 40


def _random_rows(rng: np.random.Generator, n: int, terms: int = 4) -> np.ndarray:
    """Dense rows of ``WIDTH`` with up to ``terms`` active values in {1, 2, 3} each (some rows empty)."""
    dense = np.zeros((n, WIDTH), dtype=np.float32)
    for row in dense:
        active = rng.choice(WIDTH, size=rng.integers(0, terms + 1), replace=False)
        row[active] = rng.integers(1, 4, size=len(active))
    return dense


def _texts(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _view(queries: np.ndarray, docs: np.ndarray, **settings) -> SparseView:
    """A view whose "model" looks the rows up by text: q<i> is query row i, d<i> document row i."""
    table = {**dict(zip(_texts("q", len(queries)), queries)), **dict(zip(_texts("d", len(docs)), docs))}

    def encode(sentences, role):
        return sp.csr_matrix(np.array([table[s] for s in sentences]).reshape(len(sentences), WIDTH))

    return SparseView(encode, **settings)


def _brute_force(queries: np.ndarray, docs: np.ndarray, k: int, exclude=None, cosine: bool = False):
    """Each query's k best documents by numpy's dense scores, score descending then corpus order."""
    q, d = queries.astype(np.float64), docs.astype(np.float64)
    if cosine:
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-300)
        d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-300)
    scores = q @ d.T
    ids = np.arange(len(docs))
    out_s, out_i = [], []
    for row, scores_row in enumerate(scores):
        keep = ids if exclude is None else ids[ids != exclude[row]]
        order = keep[np.lexsort((keep, -scores_row[keep]))][:k]
        out_i.append(np.r_[order, -np.ones(k - len(order), dtype=np.int64)])
        out_s.append(np.r_[scores_row[order], np.full(k - len(order), -np.inf)])
    return np.array(out_s), np.array(out_i)


@pytest.mark.parametrize("k", [1, 5, 30])
def test_search_equals_numpy_dense_top_k_with_ties_by_corpus_order(k):
    rng = np.random.default_rng(k)
    queries, docs = _random_rows(rng, 25), _random_rows(rng, 200)
    scores, ids = _view(queries, docs).search(_texts("q", 25), _texts("d", 200), k)
    want_s, want_i = _brute_force(queries, docs, k)
    np.testing.assert_array_equal(ids, want_i)
    np.testing.assert_array_equal(scores, want_s.astype(np.float32))
    assert scores.dtype == np.float32 and ids.dtype == np.int64


def test_blocks_of_documents_and_queries_do_not_change_the_lists():
    rng = np.random.default_rng(7)
    queries, docs = _random_rows(rng, 30), _random_rows(rng, 150)
    whole = _view(queries, docs).search(_texts("q", 30), _texts("d", 150), 12)
    # 7 documents a block, and a memory that holds one query's scores of a block at a time
    cut = _view(queries, docs, doc_block=7, memory_mib=7 * 16 / 2**20).search(_texts("q", 30), _texts("d", 150), 12)
    np.testing.assert_array_equal(cut[1], whole[1])
    np.testing.assert_array_equal(cut[0], whole[0])


def test_a_tie_at_the_cut_of_a_block_goes_to_the_earlier_document():
    docs = np.zeros((10, WIDTH), dtype=np.float32)
    docs[:, 0] = 1.0  # every document scores 1 against the query: the corpus order decides alone
    docs[8, 1] = 1.0  # but the ninth scores 2
    queries = np.zeros((1, WIDTH), dtype=np.float32)
    queries[0, :2] = 1.0
    for block in (3, 4, 10):
        scores, ids = _view(queries, docs, doc_block=block).search(["q0"], _texts("d", 10), 4)
        assert ids.tolist() == [[8, 0, 1, 2]] and scores.tolist() == [[2.0, 1.0, 1.0, 1.0]]


def test_a_query_sharing_no_term_gets_the_first_documents_at_zero():
    rng = np.random.default_rng(3)
    docs = _random_rows(rng, 20)
    docs[:, 0] = 0
    queries = np.zeros((1, WIDTH), dtype=np.float32)
    queries[0, 0] = 2.0
    scores, ids = _view(queries, docs, doc_block=6).search(["q0"], _texts("d", 20), 5)
    assert ids.tolist() == [[0, 1, 2, 3, 4]] and scores.tolist() == [[0.0] * 5]


def test_excluded_documents_never_appear_and_short_corpora_are_padded():
    rng = np.random.default_rng(11)
    queries, docs = _random_rows(rng, 15), _random_rows(rng, 40)
    exclude = rng.integers(-1, 40, size=15)
    scores, ids = _view(queries, docs, doc_block=9).search(_texts("q", 15), _texts("d", 40), 8, exclude=exclude)
    want_s, want_i = _brute_force(queries, docs, 8, exclude=exclude)
    np.testing.assert_array_equal(ids, want_i)
    np.testing.assert_array_equal(scores, want_s.astype(np.float32))

    scores, ids = _view(queries, docs[:3]).search(_texts("q", 15), _texts("d", 3), 5)
    want_s, want_i = _brute_force(queries, docs[:3], 5)
    np.testing.assert_array_equal(ids, want_i)
    assert (ids[:, 3:] == -1).all() and np.isneginf(scores[:, 3:]).all()


def test_cosine_search_and_pairs_are_numpy_cosines():
    rng = np.random.default_rng(5)
    queries, docs = _random_rows(rng, 10), _random_rows(rng, 60)
    view = _view(queries, docs, similarity="cosine")
    scores, ids = view.search(_texts("q", 10), _texts("d", 60), 60)
    q = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-30)
    d = docs / np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-30)
    dense = q.astype(np.float64) @ d.T.astype(np.float64)
    np.testing.assert_allclose(scores, np.take_along_axis(dense, ids, axis=1), atol=1e-6)
    assert (np.diff(scores, axis=1) <= 1e-6).all()

    pairs = view.pairs(_texts("q", 10), _texts("d", 10))
    np.testing.assert_allclose(pairs, (q.astype(np.float64) * d[:10]).sum(axis=1), atol=1e-6)


def test_pairs_are_dot_products_in_float64():
    rng = np.random.default_rng(9)
    left, right = _random_rows(rng, 30), _random_rows(rng, 30)
    view = _view(left, right)
    scores = view.pairs(_texts("q", 30), _texts("d", 30), (QUERY, DOCUMENT))
    assert scores.dtype == np.float64
    np.testing.assert_array_equal(scores, (left.astype(np.float64) * right).sum(axis=1))
    with pytest.raises(InvalidInputError, match="3 left texts and 2 right texts"):
        view.pairs(["q0", "q1", "q2"], ["d0", "d1"])


def test_facts_follow_sentence_transformers_definitions():
    """query/corpus active dims: the mean count of active terms per row; sparsity ratio: one minus
    its share of the width; avg_flops: the dot product of each side's mean "term active" vector
    (``SparseInformationRetrievalEvaluator._calculate_avg_flops``); index bytes: float32 values and
    int32 column indices of every active term, and a row pointer per document plus one."""
    rng = np.random.default_rng(13)
    queries, docs = _random_rows(rng, 12, terms=6), _random_rows(rng, 50, terms=9)
    view = _view(queries, docs, doc_block=16)
    view.search(_texts("q", 12), _texts("d", 50), 3)
    facts = view.facts()
    q_active, d_active = (queries != 0).sum(axis=1), (docs != 0).sum(axis=1)
    assert facts["query_active_dims"] == pytest.approx(q_active.mean())
    assert facts["corpus_active_dims"] == pytest.approx(d_active.mean())
    assert facts["query_sparsity_ratio"] == pytest.approx(1 - q_active.mean() / WIDTH)
    assert facts["corpus_sparsity_ratio"] == pytest.approx(1 - d_active.mean() / WIDTH)
    assert facts["avg_flops"] == pytest.approx((queries != 0).mean(axis=0) @ (docs != 0).mean(axis=0))
    assert facts["index_bytes"] == 8 * d_active.sum() + 4 * (50 + 1)
    assert facts["bytes_per_document"] == pytest.approx(facts["index_bytes"] / 50)


def test_a_symmetric_task_reports_the_active_dims_of_every_text_scored():
    rng = np.random.default_rng(17)
    left, right = _random_rows(rng, 20), _random_rows(rng, 20)
    view = _view(left, right)
    view.pairs(_texts("q", 20), _texts("d", 20), (DEFAULT, DEFAULT))
    active = np.r_[(left != 0).sum(axis=1), (right != 0).sum(axis=1)]
    assert view.facts() == pytest.approx({"active_dims": active.mean(), "sparsity_ratio": 1 - active.mean() / WIDTH})


def test_stored_zeros_are_not_active_and_bad_rows_are_refused():
    def with_zeros(sentences, role):
        return sp.csr_matrix((np.array([0.0, 1.0], dtype=np.float32), np.array([0, 1]), np.array([0, 2])), (1, 4))

    view = SparseView(with_zeros)
    view.pairs(["a"], ["b"])
    assert view.facts()["active_dims"] == 1.0

    with pytest.raises(InvalidInputError, match="returned 1 rows for 2 texts"):
        SparseView(with_zeros).pairs(["a", "b"], ["c", "d"])
    with pytest.raises(InvalidInputError, match="NaN or infinite"):
        SparseView(lambda s, r: sp.csr_matrix(np.full((len(s), 3), np.nan))).pairs(["a"], ["b"])
    with pytest.raises(InvalidInputError, match="'manhattan' is not computed here"):
        SparseView(with_zeros, similarity="manhattan")


def test_a_reranking_task_counts_each_query_once_and_every_candidate():
    """As ``SparseRerankingEvaluator``: a sample's query encoded once, its candidates each."""
    rng = np.random.default_rng(19)
    queries, docs = _random_rows(rng, 3, terms=8), _random_rows(rng, 7, terms=8)
    candidates = [[0, 1, 2], [3], [4, 5, 6]]
    left = [f"q{q}" for q, cands in enumerate(candidates) for _ in cands]
    right = [f"d{d}" for cands in candidates for d in cands]
    view = _view(queries, docs)
    view.pairs(left, right, (QUERY, DOCUMENT))
    facts = view.facts()
    assert facts["query_active_dims"] == pytest.approx((queries != 0).sum(axis=1).mean())
    assert facts["corpus_active_dims"] == pytest.approx((docs != 0).sum(axis=1).mean())


def test_a_search_holds_one_block_of_the_corpus_never_the_whole():
    """Documents of 50 active terms in a 30,000-term vocabulary, searched 1,000 a block: the search's
    peak allocations (the encoding of a block included) are the same for 5,000 documents and for
    20,000 (7.6 MiB as CSR, 2.2 GiB dense), and under half the larger corpus."""
    import tracemalloc

    width, terms = 30_000, 50

    def encode(sentences, role):
        rows = []
        for text in sentences:
            rng = np.random.default_rng(int(text[1:]) + (0 if text[0] == "d" else 10**6))
            rows.append((rng.choice(width, size=terms, replace=False), rng.random(terms, dtype=np.float32)))
        indices = np.concatenate([c for c, _ in rows]) if rows else np.zeros(0, np.int64)
        data = np.concatenate([v for _, v in rows]) if rows else np.zeros(0, np.float32)
        return sp.csr_matrix((data, indices, np.arange(len(rows) + 1) * terms), shape=(len(rows), width))

    def peak_of(documents: int) -> tuple[int, tuple[np.ndarray, np.ndarray]]:
        view = SparseView(encode, doc_block=1_000, memory_mib=1.0)
        queries, corpus = _texts("q", 10), _texts("d", documents)  # the texts are the caller's
        tracemalloc.start()
        try:
            found = view.search(queries, corpus, 5)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert view.facts()["index_bytes"] == 8 * terms * documents + 4 * (documents + 1)
        return peak, found

    small, _ = peak_of(5_000)
    large, (scores, ids) = peak_of(20_000)
    corpus_bytes = 8 * terms * 20_000
    assert abs(large - small) < 2**19 and large < corpus_bytes / 2, (small, large)
    # and the lists are the exact ones, block by block as a whole
    whole = SparseView(encode, doc_block=20_000).search(_texts("q", 10), _texts("d", 20_000), 5)
    np.testing.assert_array_equal(ids, whole[1])
    np.testing.assert_array_equal(scores, whole[0])
