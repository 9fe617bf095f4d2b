"""A callable from text pairs to scores, given as ``benchharness.PairScorer(fn)``: evaluated as a
cross-encoder on the tasks that score given pairs (metrics checked against scikit-learn and SciPy on
the function's own scores), batched longest pair first, pinned by ``identity=`` (cached and stored)
or unpinned (neither), and refused in one line by tasks that need vectors or a search."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score

import benchharness
from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import CROSS_ENCODER
from benchharness.encoders.in_memory import PairCallable
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from tests.helpers import DATA


def overlap(pairs):
    """Shared words over the union (Jaccard), plus a small tie-breaker from the texts' lengths."""
    scores = []
    for left, right in pairs:
        a, b = set(left.split()), set(right.split())
        scores.append(len(a & b) / len(a | b) + 1e-4 * (len(left) % 7) + 1e-6 * len(right))
    return np.array(scores)


class Counting:
    """``overlap`` that keeps each batch it was called on."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []

    def __call__(self, pairs):
        self.batches.append(list(pairs))
        return overlap(pairs)


LINES = [
    {
        "query": f"how do I {verb} the {thing}",
        "positive": [f"ways to {verb} a {thing} quickly", f"{verb} your {thing} step by step"],
        "negative": [f"the history of the {other}" for other in ("kernel", "desktop", "printer", "network")]
        + [f"why {verb} fails on old machines"],
    }
    for verb, thing in [("mount", "disk"), ("update", "kernel"), ("share", "printer"), ("reset", "password")]
]


@pytest.fixture
def rerank(tmp_path, monkeypatch):
    monkeypatch.setattr(declarations, "REGISTERED", {})
    path = tmp_path / "rerank.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    register_file_task("my-rerank", path, kind="reranking")
    return "my-rerank"


def test_a_pair_scorer_reranks_by_its_scores(rerank):
    fn = Counting()
    [result] = benchharness.evaluate(benchharness.PairScorer(fn), rerank, batch_size=4)
    ap, rr = [], []
    for line in LINES:
        docs = line["positive"] + line["negative"]
        scores = overlap([(line["query"], d) for d in docs])
        relevant = np.r_[np.ones(len(line["positive"])), np.zeros(len(line["negative"]))]
        ap.append(average_precision_score(relevant, scores))
        rr.append(1 / (1 + int(np.flatnonzero(relevant[np.argsort(-scores)])[0])))
    assert result.metrics["map"] == pytest.approx(100 * np.mean(ap), abs=1e-9)
    assert result.metrics["mrr@10"] == pytest.approx(100 * np.mean(rr), abs=1e-9)
    assert result.metrics["pairs_scored"] == sum(len(line["positive"]) + len(line["negative"]) for line in LINES)
    assert result.protocol["model_kind"] == CROSS_ENCODER and result.protocol["similarity"] == "the model's pair score"
    assert max(map(len, fn.batches)) == 4
    lengths = [len(a) + len(b) for batch in fn.batches for a, b in batch]
    assert lengths == sorted(lengths, reverse=True)  # batches of similar length, longest first


def test_sts_is_the_spearman_of_the_pair_scores(project):
    [result] = benchharness.evaluate(benchharness.PairScorer(overlap), "SICKRelatedness-trial", intervals=False)
    task = benchharness.get_task("SICKRelatedness-trial")
    task.load(DataRoot(DATA))
    [(left, right, gold)] = task.subsets.values()
    expected = spearmanr(overlap(list(zip(left, right))), gold)[0]
    assert result.main_score == pytest.approx(100 * expected, abs=1e-9)


def test_unpinned_it_is_neither_cached_nor_stored_and_pinned_it_is_both(rerank, tmp_path):
    fn = Counting()
    scorer = benchharness.PairScorer(fn)
    [first] = benchharness.evaluate(scorer, rerank, cache_dir=tmp_path / "cache", results_dir=tmp_path / "results")
    benchharness.evaluate(scorer, rerank, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "results").exists() and not any((tmp_path / "cache").glob("*/*"))
    n = sum(map(len, fn.batches))
    assert n == 2 * first.metrics["pairs_scored"]  # scored twice

    pinned = Counting()
    [kept] = benchharness.evaluate(
        benchharness.PairScorer(pinned), rerank, identity="overlap-v1", cache_dir=tmp_path / "cache"
    )
    [again] = benchharness.evaluate(
        benchharness.PairScorer(pinned), rerank, identity="overlap-v1", cache_dir=tmp_path / "cache"
    )
    assert sum(map(len, pinned.batches)) == kept.metrics["pairs_scored"]  # the second run read the cache
    assert again.main_score == kept.main_score
    [stored] = benchharness.evaluate(
        benchharness.PairScorer(pinned), rerank, identity="overlap-v1", results_dir=tmp_path / "results"
    )
    assert (tmp_path / "results").is_dir() and stored.main_score == kept.main_score


def test_its_identity_is_the_given_one_with_the_functions_name():
    encoder = benchharness.as_encoder(benchharness.PairScorer(overlap), identity="overlap-v1")
    assert isinstance(encoder, PairCallable) and encoder.name == "callable:overlap" and encoder.pinned
    assert encoder.identity_record() == {
        "family": "pair-callable",
        "identity": "overlap-v1",
        "callable": "overlap",
        "kind": CROSS_ENCODER,
    }
    assert not benchharness.as_encoder(benchharness.PairScorer(overlap)).pinned


@pytest.mark.parametrize(
    ("task", "needs"),
    [
        ("MR", "needs vectors (to train a classifier on, cluster or index)"),
        ("beir", "needs a search of the whole corpus"),
    ],
)
def test_tasks_it_cannot_run_are_refused_in_one_line_before_scoring(project, monkeypatch, task, needs):
    monkeypatch.setattr(declarations, "REGISTERED", {})
    if task == "beir":
        folder = Path("beir")
        (folder / "qrels").mkdir(parents=True)
        (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n')
        (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "first"}\n')
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
        register_file_task("beir", folder, kind="retrieval")
    fn = Counting()
    results = benchharness.evaluate(benchharness.PairScorer(fn), task, name="mine", errors="keep")
    advice = (
        "Rerank a first stage's top k with it instead: '<first stage>>>mine?k=100' (for example "
        "'bm25>>mine?k=100'; the first stage may be any encoder, bm25 or run:<file>)"
        if task == "beir"
        else "Run it on tasks that use what it gives, or choose a dense encoder for this one"
    )
    assert results.failed[0].message == (
        f"mine is a cross-encoder (a score for each text pair, read together), and {task} {needs}; a cross-encoder "
        f"gives a score for each text pair. {advice}"
    )
    assert fn.batches == []


def test_what_is_not_a_function_is_refused():
    with pytest.raises(InvalidInputError, match="PairScorer\\(3\\): give a function from a list of text pairs"):
        benchharness.PairScorer(3)
