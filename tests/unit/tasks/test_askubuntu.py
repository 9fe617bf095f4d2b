"""AskUbuntu on the real annotation files with a synthetic text file in the canonical format.

The question texts are not on these machines; the synthetic ``text_tokenized.txt.gz`` gives every
annotated id a title (and body), so the readers, the query counts (186 useb, 361 mteb, checked
against the real files) and the metrics are exercised on the real annotations.
"""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pytest

from benchharness.core.data_root import DataError, DataRoot
from benchharness.tasks.askubuntu import AskUbuntu, Query, read_annotations
from tests.helpers import DATA, needs_data

pytestmark = needs_data("askubuntu/dev.txt", "askubuntu/test.txt")


def _annotation_ids():
    ids = set()
    for split in ("dev", "test"):
        for line in (DATA / "askubuntu" / f"{split}.txt").read_text().splitlines():
            qid, _, cands, _ = line.split("\t")
            ids.update([qid, *cands.split()])
    return ids


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("askubuntu-data")
    (tmp / "askubuntu").mkdir()
    for split in ("dev", "test"):
        shutil.copy(DATA / "askubuntu" / f"{split}.txt", tmp / "askubuntu" / f"{split}.txt")
    with gzip.open(tmp / "askubuntu" / "text_tokenized.txt.gz", "wt", encoding="utf-8") as fh:
        for qid in sorted(_annotation_ids(), key=int):
            fh.write(f"{qid}\tquestion title {qid} ?\tbody of question {qid} .\n")
        fh.write("999999999\tan extra question\n")  # no body field: allowed
    return DataRoot(tmp)


def _vector_for(positive_of: dict[str, str]):
    """Titles of similar candidates point along the query's axis, others are orthogonal."""

    def embed(titles, role=None):
        out = []
        for t in titles:
            qid = t.split()[2]
            v = np.zeros(3)
            v[0 if qid in positive_of else 1] = 1.0
            out.append(v)
        return np.array(out)

    return embed


def _bm25_order_metrics(queries):
    """AP/RR/P@1/P@5 of the BM25 order, computed directly from the annotation lists."""
    ap, rr, p1, p5 = [], [], [], []
    for q in queries:
        labels = [c in q.similar for c in q.candidates]
        ranks = [i + 1 for i, hit in enumerate(labels) if hit]
        ap.append(np.mean([(j + 1) / r for j, r in enumerate(ranks)]))
        rr.append(1 / ranks[0])
        p1.append(labels[0])
        p5.append(sum(labels[:5]) / 5)
    return {k: 100 * float(np.mean(v)) for k, v in (("map", ap), ("mrr", rr), ("p@1", p1), ("p@5", p5))}


@pytest.mark.parametrize("variant,count", [("useb", 186), ("mteb", 361)])
def test_query_counts_on_real_annotations(root, variant, count):
    task = AskUbuntu(variant)
    task.load(root)
    assert len(task.queries) == count
    assert len(task.sentences()) == 21 * count


def test_ties_follow_bm25_order(root):
    task = AskUbuntu("useb")
    task.load(root)
    out = task.evaluate(lambda titles, role=None: np.ones((len(titles), 4)), 1111)  # every cosine equal
    expected = _bm25_order_metrics(task.queries)
    for key, value in expected.items():
        assert out[key] == pytest.approx(value)
    assert out["n_queries"] == 186


def test_two_level_scores_rank_flagged_candidates_first(root):
    """Candidates flagged anywhere as similar score 1, the rest 0: each list becomes the flagged
    candidates in BM25 order, then the others in BM25 order (an id can be similar for one query
    and not for another, so this is not always a perfect ranking)."""
    task = AskUbuntu("useb")
    task.load(root)
    flagged = {c: q.qid for q in task.queries for c in q.similar} | {q.qid: q.qid for q in task.queries}
    out = task.evaluate(_vector_for(flagged), 1111)
    reordered = [
        Query(
            q.qid,
            q.similar,
            tuple([c for c in q.candidates if c in flagged] + [c for c in q.candidates if c not in flagged]),
            q.bm25,
        )
        for q in task.queries
    ]
    expected = _bm25_order_metrics(reordered)
    for key, value in expected.items():
        assert out[key] == pytest.approx(value)
    assert expected["map"] > _bm25_order_metrics(task.queries)["map"]


def test_missing_texts_explain_where_to_get_them(tmp_path):
    (tmp_path / "askubuntu").mkdir()
    shutil.copy(DATA / "askubuntu" / "test.txt", tmp_path / "askubuntu" / "test.txt")
    with pytest.raises(DataError, match="benchharness data download askubuntu"):
        AskUbuntu("useb").load(DataRoot(tmp_path))


def test_malformed_annotation_line(tmp_path):
    bad = tmp_path / "test.txt"
    bad.write_text("1\t2\t2 3\t1.0\n")
    with pytest.raises(DataError, match=r"test\.txt:1: 2 candidates but 1 BM25"):
        read_annotations(bad)
