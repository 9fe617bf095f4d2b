"""QQP retrieval on a synthetic file in the exact format, metrics computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.data_root import DataError, DataRoot
from benchharness.tasks.qqp import QQP, read_pairs, search

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
    "best way to learn python": [1, 0, 0], "define love": [0, 1, 0], "same text": [0, 0, 1],
    "meaning of love": [0.6, 0.8, 0], "other": [0, 0, -1], "what is love": [0, 1, 0.1],
    "how do i learn python": [0.8, 0.6, 0],
}


@pytest.fixture
def qqp_root(tmp_path):
    folder = tmp_path / "qqp"
    folder.mkdir()
    lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"] + ["\t".join(r) for r in ROWS]
    (folder / "quora_duplicate_questions.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return DataRoot(tmp_path)


def embed(texts):
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def test_reader_handles_quoted_newlines(qqp_root):
    rows = read_pairs(qqp_root.root / "qqp" / "quora_duplicate_questions.tsv")
    assert len(rows) == 7
    assert rows[5][0] == "a question\nover two lines"


def test_corpus_queries_and_hand_computed_scores(qqp_root):
    task = QQP()
    task.load(qqp_root)
    assert task.corpus == ["best way to learn python", "define love", "same text", "meaning of love", "other",
                           "what is love"]
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
    scores, ids = search(corpus, queries, k=5, block=10, exclude=exclude)
    full = queries @ corpus.T
    for i in range(37):
        s = full[i].astype(np.float64)
        if exclude[i] >= 0:
            s[exclude[i]] = -np.inf
        expected = sorted(range(300), key=lambda j: (-s[j], j))[:5]
        assert ids[i].tolist() == expected
    assert ids[0, :2].tolist() == [3, 10]


def test_missing_file_says_how_to_get_it(tmp_path):
    with pytest.raises(DataError, match="benchharness data download qqp"):
        QQP().load(DataRoot(tmp_path))


def test_bad_row_names_file_and_line(tmp_path):
    (tmp_path / "qqp").mkdir()
    (tmp_path / "qqp" / "quora_duplicate_questions.tsv").write_text(
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\ta\tb\tyes\n")
    with pytest.raises(DataError, match=r"quora_duplicate_questions.tsv:2"):
        QQP().load(DataRoot(tmp_path))
