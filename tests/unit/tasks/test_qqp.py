"""QQP retrieval on a synthetic file in the exact format, metrics computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.data_root import DataError, DataRoot
from benchharness.scoring.top_k import top_k
from benchharness.tasks.qqp import QQP, read_pairs

ROWS = [
    ("1", "1", "2", "how do i learn python", "best way to learn python", "1"),
    ("2", "3", "4", "what is love", "define love", "1"),
    ("3", "5", "2", "what is love", "best way to learn python", "0"),
    ("4", "6", "7", "same text", "same text", "1"),  # identical pair: not a retrieval problem
    ("5", "8", "9", "what is love", "meaning of love", "1"),
    ("6", "10", "11", '"a question\nover two lines"', "other", "0"),
    ("7", "12", "13", "define love", "what is love", "1"),
]
VECTORS = {
    "best way to learn python": [1, 0, 0],
    "define love": [0, 1, 0],
    "same text": [0, 0, 1],
    "meaning of love": [0.6, 0.8, 0],
    "other": [0, 0, -1],
    "what is love": [0, 1, 0.1],
    "how do i learn python": [0.8, 0.6, 0],
}


@pytest.fixture
def qqp_root(tmp_path):
    folder = tmp_path / "qqp"
    folder.mkdir()
    lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"] + ["\t".join(r) for r in ROWS]
    (folder / "quora_duplicate_questions.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return DataRoot(tmp_path)


def embed(texts, role=None):
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def test_reader_handles_quoted_newlines(qqp_root):
    rows = read_pairs(qqp_root.root / "qqp" / "quora_duplicate_questions.tsv")
    assert len(rows) == 7
    assert rows[5][0] == "a question\nover two lines"


def test_corpus_queries_and_hand_computed_scores(qqp_root):
    task = QQP()
    task.load(qqp_root)
    assert task.corpus == [
        "best way to learn python",
        "define love",
        "same text",
        "meaning of love",
        "other",
        "what is love",
    ]
    assert task.queries == ["how do i learn python", "what is love", "define love"]
    assert [r.tolist() for r in task.relevant] == [[0], [1, 3], [5]]
    out = task.evaluate(embed, 1111)
    # python query: meaning-of-love (.96) > python (.8) > ...: AP 1/2, RR 1/2; the two love queries
    # find their duplicates first once their own text is excluded: AP 1, RR 1
    assert out["map"] == pytest.approx(100 * (0.5 + 1 + 1) / 3)
    assert out["mrr@10"] == pytest.approx(100 * (0.5 + 1 + 1) / 3)
    assert out["n_queries"] == 3 and out["n_corpus"] == 6


def test_search_matches_brute_force_with_exclusion_and_ties():
    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(300, 8)).astype(np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    corpus[10] = corpus[3]  # exact tie: corpus order decides
    queries = rng.normal(size=(37, 8)).astype(np.float32)
    queries[0] = corpus[3]
    exclude = rng.integers(-1, 300, size=37)
    exclude[0] = -1
    full = queries @ corpus.T
    for doc_block in (300, 7, 64):  # 7: the tied documents 3 and 10 fall in different blocks
        scores, ids = top_k(
            queries, (corpus[i : i + doc_block] for i in range(0, 300, doc_block)), k=5, exclude=exclude, query_block=10
        )
        for i in range(37):
            s = full[i].astype(np.float64)
            if exclude[i] >= 0:
                s[exclude[i]] = -np.inf
            expected = sorted(range(300), key=lambda j: (-s[j], j))[:5]
            assert ids[i].tolist() == expected
            np.testing.assert_allclose(scores[i], s[expected], rtol=0, atol=1e-6)
        assert ids[0, :2].tolist() == [3, 10]


def test_block_wise_search_gives_the_whole_corpus_search_bit_for_bit():
    """Cutting the corpus into blocks changes neither ids nor scores: each dot product is the same
    faiss computation (its reduction runs over the dimension, not the documents)."""
    rng = np.random.default_rng(1)
    corpus = rng.standard_normal((5000, 384), dtype=np.float32)
    queries = rng.standard_normal((300, 384), dtype=np.float32)
    whole = top_k(queries, [corpus], k=100)
    blocks = top_k(queries, (corpus[i : i + 999] for i in range(0, 5000, 999)), k=100)
    np.testing.assert_array_equal(whole[1], blocks[1])
    np.testing.assert_array_equal(whole[0], blocks[0])


def test_a_corpus_smaller_than_k_pads_with_minus_one():
    scores, ids = top_k(np.eye(2, dtype=np.float32), [np.eye(2, dtype=np.float32)], k=4, exclude=np.array([1, -1]))
    assert ids.tolist() == [[0, -1, -1, -1], [1, 0, -1, -1]]
    assert np.isneginf(scores[0, 1:]).all()


def test_missing_file_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError, match="benchharness data download qqp"):
        QQP().load(DataRoot(tmp_path))


def test_bad_row_names_file_and_line(tmp_path):
    (tmp_path / "qqp").mkdir()
    (tmp_path / "qqp" / "quora_duplicate_questions.tsv").write_text(
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\ta\tb\tyes\n"
    )
    with pytest.raises(DataError, match=r"quora_duplicate_questions.tsv:2"):
        QQP().load(DataRoot(tmp_path))


def test_the_quantized_variants_rank_by_sign_bits_computed_by_hand(qqp_root):
    """Sign bits of the corpus: 100 010 001 110 000 011; of the queries 110, 011, 010. QQP-binary
    ranks by Hamming distance, ties in corpus order, own text excluded: the python query finds its
    duplicate second (AP 1/2), "what is love" its two at ranks 1 and 3 (AP (1 + 2/3)/2), "define
    love" its one third (AP 1/3). Rescored (every document a candidate) by the float query against
    the bits: ranks 2; 1 and 2; 2."""
    from benchharness import tasks

    binary = tasks.get("QQP-binary")
    binary.load(qqp_root)
    out = binary.evaluate(embed, 1111)
    assert out["map"] == pytest.approx(100 * (1 / 2 + (1 + 2 / 3) / 2 + 1 / 3) / 3)
    assert out["mrr@10"] == pytest.approx(100 * (1 / 2 + 1 + 1 / 3) / 3)
    assert out["index_bytes"] == 6  # 3 bits a document, one byte each
    rescored = tasks.get("QQP-binary-rescore4")
    rescored.load(qqp_root)
    out = rescored.evaluate(embed, 1111)
    assert out["map"] == pytest.approx(100 * (1 / 2 + 1 + 1 / 2) / 3)
    assert out["mrr@10"] == pytest.approx(100 * (1 / 2 + 1 + 1 / 2) / 3)
    int8 = tasks.get("QQP-int8")
    int8.load(qqp_root)
    assert int8.evaluate(embed, 1111)["index_bytes"] == 6 * 3  # a byte a dimension
    assert tasks.resolve("qqp") == ["QQP"] and not binary.metadata.on_board  # variants: asked for by name
