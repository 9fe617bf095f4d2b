"""BM25 (``bm25``, ``bm25:<method>?k1=..&b=..``) against ``bm25s`` run directly on the same texts:
the same index, the same scores, the same lists (where scores tie, ``bm25s``'s partial sort leaves
no stated order and the harness orders by corpus position: the same documents at each score)."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.kinds import ViewSettings
from benchharness.evaluation.resolver import Resolver

bm25s = pytest.importorskip("bm25s")

CORPUS = [
    "the cat sat on the mat",
    "a dog chased the cat around the garden",
    "stock markets fell sharply on monday",
    "the garden was full of roses and tulips",
    "investors sold shares as markets fell",
    "my dog sleeps on the mat all day",
    "roses are red and violets are blue",
    "the weather on monday was cold and wet",
    "cats and dogs are common pets",
    "a quiet monday in the garden",
]
QUERIES = ["cat on a mat", "markets on monday", "red roses in the garden", "the and of", "pets"]


def _direct(queries, corpus, k, **settings):
    retriever = bm25s.BM25(**settings)
    retriever.index(bm25s.tokenize(corpus, show_progress=False), show_progress=False)
    return retriever.retrieve(bm25s.tokenize(queries, show_progress=False), k=k, show_progress=False)


def _same_lists(ours, theirs):
    (our_scores, our_ids), (their_ids, their_scores) = ours, theirs
    np.testing.assert_array_equal(our_scores, their_scores.astype(np.float64))
    for row_s, row_i, their_row in zip(our_scores, our_ids, their_ids):
        last = row_s[-1]  # the tie group cut by k may hold other members on each side
        for value in set(row_s.tolist()) - {last}:
            assert set(row_i[row_s == value]) == set(their_row[row_s == value])


@pytest.mark.parametrize(
    ("name", "settings"),
    [("bm25", {}), ("bm25:robertson?k1=1.2&b=0.5", {"method": "robertson", "k1": 1.2, "b": 0.5})],
)
def test_bm25_scores_and_ranks_what_bm25s_gives(name, settings):
    model = Resolver().get(name)
    view = model.view(ViewSettings())  # type: ignore[attr-defined]
    ours = view.search(QUERIES, CORPUS, 6)
    _same_lists(ours, _direct(QUERIES, CORPUS, 6, **settings))
    assert ours[1][0, 0] == 0 and ours[1][1, 0] in (2, 4, 7)  # the cat on the mat; markets or monday
    assert np.all(ours[0][3] == 0)  # stop words only: no term to score, every document 0, corpus order
    assert ours[1][3].tolist() == list(range(6))
    assert view.facts()["index_bytes"] > 0


def test_the_identity_records_every_setting():
    identity = Resolver().get("bm25:lucene?k1=0.9&b=0.4").identity_record()
    assert identity["method"] == "lucene" and identity["k1"] == 0.9 and identity["b"] == 0.4
    tokenizer = identity["tokenizer"]
    assert tokenizer["stopwords"] == "english" and tokenizer["stemmer"] is None and tokenizer["lower"] is True
    assert len(tokenizer["stopwords_sha256"]) == 64 and identity["library"].startswith("bm25s 0.")
    assert identity["kind"] == "lexical"
    assert Resolver().get("bm25").identity != Resolver().get("bm25:lucene?k1=0.9").identity


def test_a_wrong_setting_is_refused_in_one_line():
    with pytest.raises(ValueError, match="unknown BM25 method 'okapi'; bm25s has lucene, robertson"):
        Resolver().get("bm25:okapi")
    with pytest.raises(ValueError, match="k1=-1; a BM25 parameter is a number, 0 or more"):
        Resolver().get("bm25:lucene?k1=-1")


def test_an_excluded_document_never_appears():
    view = Resolver().get("bm25").view(ViewSettings())  # type: ignore[attr-defined]
    _, ids = view.search(QUERIES[:1], CORPUS, 3, exclude=np.array([0]))
    assert 0 not in ids[0] and ids[0, 0] in (5, 1, 8)
