"""Toy models for pipeline tests, whose scores are given by hand: a first stage that lists documents
by a fixed score matrix (counting its searches), rerankers that score pairs by another, and the BEIR
folder of their queries and documents."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchharness.core.kind_models import PairModel, SearchModel
from benchharness.core.kinds import LEXICAL, View, ViewSettings
from benchharness.core.specs import Family
from benchharness.scoring.ranked_lists import best_of_row, padded
from tests.fakes import HashEncoder

QUERIES = ["what is red", "what is blue", "what is green"]
DOCS = [f"document {w}" for w in ("zero", "one", "two", "three", "four", "five")]
#: the first stage's score of each (query, document): top 3 are d0 d1 d2 | d3 d4 d5 | d1 d4 d0
FIRST = np.array(
    [
        [0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
        [0.1, 0.2, 0.3, 0.9, 0.8, 0.7],
        [0.5, 0.9, 0.1, 0.2, 0.8, 0.3],
    ]
)
#: the reranker's score of each pair
JUDGE = np.array(
    [
        [0.1, 0.5, 0.9, 0.95, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.2, 0.7, 0.3],
        [0.6, 0.1, 0.0, 0.0, 0.9, 0.0],
    ]
)
#: relevant documents: q0's d3 is outside the first stage's top 3
QRELS = {0: [2, 3], 1: [4], 2: [1]}
#: the k each search of the toy first stage was asked for
SEARCHES: list[int] = []


class Listed(SearchModel):
    """A first stage that lists documents by a score matrix, counting its searches in ``SEARCHES``."""

    model_kind = LEXICAL
    similarity = "given scores"

    def __init__(self, name: str, scores: np.ndarray = FIRST) -> None:
        super().__init__(name)
        self.scores = scores

    def identity_info(self) -> dict:
        return {"family": "toy", "scores": self.scores.tolist()}

    def view(self, settings: ViewSettings) -> View:
        return ListedView(self.scores)


class ListedView(View):
    kind = LEXICAL
    offers = frozenset({"search"})

    def __init__(self, scores: np.ndarray) -> None:
        self.scores = scores

    def _pairs(self, left, right, roles):
        raise AssertionError("a first stage is never asked for pairs")

    def _search(self, queries, corpus, k, roles, exclude):
        SEARCHES.append(k)
        cols = [DOCS.index(d) for d in corpus]
        banned = [-1] * len(queries) if exclude is None else [int(e) for e in exclude]
        rows = [best_of_row(self.scores[QUERIES.index(q), cols], k, ban) for q, ban in zip(queries, banned)]
        return padded(rows, k)


class Judge(PairModel):
    """A reranker scoring pairs by a score matrix."""

    def __init__(self, name: str, scores: np.ndarray = JUDGE) -> None:
        super().__init__(name)
        self.scores = scores

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.array([self.scores[QUERIES.index(q), DOCS.index(d)] for q, d in pairs])

    def identity_info(self) -> dict:
        return {"family": "toy", "scores": self.scores.tolist()}


#: the toy models by target: ``agree`` reranks as the first stage ranks, ``flat`` scores every pair alike
TOYS = {
    "first": lambda name: Listed(name),
    "second": lambda name: Listed(name, JUDGE),
    "judge": lambda name: Judge(name),
    "agree": lambda name: Judge(name, FIRST),
    "flat": lambda name: Judge(name, np.full_like(FIRST, 0.5)),
    "hash": lambda name: HashEncoder(name, dim=4),
}


def _toy(name: str, spec: dict, context) -> object:
    return TOYS[spec["model"]](name)


#: the ``toy:<target>`` family of the models above
FAMILY = Family.of("toy", _toy, accepts=())


def write_beir(folder: Path) -> Path:
    """A BEIR folder of ``QUERIES`` and ``DOCS`` judged by ``QRELS`` (ids q0.., d0..)."""
    (folder / "qrels").mkdir(parents=True)
    corpus = "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCS))
    (folder / "corpus.jsonl").write_text(corpus)
    queries = "".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(QUERIES))
    (folder / "queries.jsonl").write_text(queries)
    lines = "".join(f"q{q}\td{d}\t1\n" for q, docs in QRELS.items() for d in docs)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines)
    return folder


def write_run(path: Path, scores: np.ndarray = FIRST, depth: int = len(DOCS)) -> Path:
    """A TREC run file of each query's top ``depth`` documents by ``scores`` (written shuffled: the
    reader orders by score)."""
    lines = [
        f"q{q} Q0 d{d} {rank} {scores[q, d]} toy\n"
        for q in range(len(QUERIES))
        for rank, d in enumerate(np.argsort(-scores[q], kind="stable")[:depth], start=1)
    ]
    path.write_text("".join(lines[::-1]))
    return path
