"""Search at reduced precision against computations done another way: Hamming distances counted
bit by bit with numpy, int8 inner products in int64 on sentence-transformers' own codes, and the
rescoring pass against sentence-transformers' ``semantic_search_faiss``."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.errors import InvalidInputError
from benchharness.scoring import quantized_search
from benchharness.scoring.quantized_search import QuantizedCorpus


def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def ranked(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each row by (score desc, id asc): the tie rule, by numpy's stable sort."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), order


DOCS, QUERIES = unit_rows(700, 20, 0), unit_rows(30, 20, 1)


def blocks(docs: np.ndarray, size: int = 256) -> list[np.ndarray]:
    """The corpus as a task hands it over, a block of rows at a time (not unit length: indexing
    normalises them)."""
    return [3.0 * docs[at : at + size] for at in range(0, len(docs), size)]


@pytest.mark.parametrize("block", [700, 64])
def test_binary_search_ranks_by_hamming_distance_ties_in_corpus_order(block, monkeypatch):
    monkeypatch.setattr(quantized_search, "BLOCK", block)  # the lists do not depend on the blocks
    corpus = QuantizedCorpus.build(lambda: blocks(DOCS), "binary")
    assert corpus.codes.shape == (700, 3) and corpus.nbytes == 700 * 3  # 20 bits in 3 bytes
    scores, ids = corpus.search(QUERIES, 10)
    distances = ((QUERIES[:, None, :] > 0) != (DOCS[None, :, :] > 0)).sum(-1)  # counted bit by bit
    want_scores, want_ids = ranked(-distances.astype(np.float32), 10)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)


def test_int8_search_scores_the_inner_product_of_sentence_transformers_codes():
    from sentence_transformers.util.quantization import quantize_embeddings

    corpus = QuantizedCorpus.build(lambda: blocks(DOCS), "int8")
    assert corpus.codes.dtype == np.int8 and corpus.nbytes == 700 * 20
    ranges = np.vstack([DOCS.min(axis=0), DOCS.max(axis=0)])  # calibrated on the corpus
    doc_codes = quantize_embeddings(DOCS, precision="int8", ranges=ranges).astype(np.int64)
    query_codes = quantize_embeddings(QUERIES, precision="int8", ranges=ranges).astype(np.int64)
    np.testing.assert_array_equal(corpus.codes, doc_codes)
    scores, ids = corpus.search(QUERIES, 10)
    want_scores, want_ids = ranked((query_codes @ doc_codes.T).astype(np.float32), 10)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)


@pytest.mark.parametrize(("precision", "theirs"), [("binary", "ubinary"), ("int8", "uint8")])
def test_rescoring_every_candidate_ranks_as_sentence_transformers_rescores(precision, theirs):
    """With ``k * m`` covering the corpus, the first pass keeps every document, so both rank the
    whole corpus by the float query against the stored codes (bits; bucket starts, which uint8
    and int8 codes of the same ranges share)."""
    from sentence_transformers.util.quantization import quantize_embeddings, semantic_search_faiss

    ranges = np.vstack([DOCS.min(axis=0), DOCS.max(axis=0)])
    corpus = QuantizedCorpus.build(lambda: blocks(DOCS), precision)
    scores, ids = corpus.search(QUERIES, 10, rescore=70)
    codes = quantize_embeddings(DOCS, precision=theirs, ranges=ranges)
    hits, _ = semantic_search_faiss(
        QUERIES, codes, corpus_precision=theirs, top_k=10, ranges=ranges, rescore=True, rescore_multiplier=70
    )
    np.testing.assert_array_equal(ids, [[h["corpus_id"] for h in row] for row in hits])
    np.testing.assert_allclose(scores, [[h["score"] for h in row] for row in hits], atol=1e-5)


def test_rescoring_keeps_the_best_of_the_quantized_candidates_and_the_exclusions():
    corpus = QuantizedCorpus.build(lambda: blocks(DOCS), "binary")
    _, first = corpus.search(QUERIES, 40)
    exclude = first[:, 0]  # each query's best document left out
    scores, ids = corpus.search(QUERIES, 10, rescore=4, exclude=exclude)
    _, candidates = corpus.search(QUERIES, 40, exclude=exclude)
    bits = np.unpackbits(corpus.codes, axis=-1)[:, :20].astype(np.float32)
    for q in range(len(QUERIES)):
        assert set(ids[q]) <= set(candidates[q]) and exclude[q] not in ids[q]
        rescored = QUERIES[q] @ bits[candidates[q]].T
        order = np.lexsort((candidates[q], -rescored))[:10]
        np.testing.assert_array_equal(ids[q], candidates[q][order])
        np.testing.assert_allclose(scores[q], rescored[order], rtol=1e-6)


def test_short_lists_are_padded_and_bad_settings_refused():
    corpus = QuantizedCorpus.build(lambda: blocks(DOCS[:3]), "binary")
    scores, ids = corpus.search(QUERIES[:2], 5, rescore=2)
    assert (ids[:, 3:] == -1).all() and np.isinf(scores[:, 3:]).all() and (ids[:, :3] >= 0).all()
    with pytest.raises(InvalidInputError, match="choose among float32, int8, binary"):
        QuantizedCorpus.build(lambda: blocks(DOCS), "int4")
    with pytest.raises(InvalidInputError, match=r"rescore=2: .*float32"):
        QuantizedCorpus.build(lambda: blocks(DOCS), "float32").search(QUERIES, 5, rescore=2)
