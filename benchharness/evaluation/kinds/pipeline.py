"""The pipeline kind: two-stage retrieval, ``FIRST>>RERANKER?k=K`` (``encoders.pipeline.Pipeline``).

A search asks the first stage (``first_stage.search_view``: its kind's exact search, shared by the
run's pipelines) for each query's top K, has the reranker's view score every (query, candidate) pair
in the task's roles (a cross-encoder's pair score, a dense encoder's cosine...), and returns each
query's reranked candidates, ties by first-stage rank, padded to the depth asked. Only the first
stage's candidates are reranked: a relevant document it missed stays missed, so the score is the
pipeline's, the first stage's recall included. The ``always_rerank_positives`` variant adds each
query's relevant documents the first stage missed before reranking, as sentence-transformers'
``CrossEncoderRerankingEvaluator`` does by default; it needs the task's relevance
(``SearchContext.relevant``) and is recorded as another protocol.

Beside the task's metrics the view reports ``first_stage/recall@K`` (the share of each query's
relevant documents among the first stage's top K: the reranker's ceiling, where the task gives its
relevance), the reranker's own facts under ``reranker/`` (``reranker/pairs_scored``) and, for the
variant, ``positives_added``. The first stage's own metrics on the task are its result's
``first_stage/...`` (the runner scores the task with ``Pipeline.stages``, from the same lists).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import (
    PAIRS,
    PIPELINE,
    SEARCH,
    KindMismatchError,
    ModelKind,
    Ranked,
    Roles,
    SearchRequest,
    SearchView,
    View,
    ViewSettings,
)
from benchharness.encoders.pipeline import ALWAYS_RERANK_POSITIVES, Pipeline
from benchharness.evaluation.kinds import held_model, kind_of
from benchharness.evaluation.kinds.first_stage import SharedSearch, search_view
from benchharness.scoring.ranked_lists import listed, reranked
from benchharness.scoring.top_k import DOC_BLOCK


def pair_view(encoder: Encoder, settings: ViewSettings) -> View:
    """``encoder`` as a reranker: its kind's view of pairs (a dense encoder's: cosine of its
    vectors). A model that scores no given pair (BM25, a run file) is refused in one line."""
    kind = kind_of(encoder)
    if PAIRS not in kind.offers:
        raise KindMismatchError(
            f"{encoder.name} is {kind.title} ({kind.gives}) and cannot rerank: a reranker scores each "
            "(query, candidate) pair it is given; put it before >> as the first stage"
        )
    if kind.open_view is None:
        from benchharness.scoring.views import DenseView

        return DenseView(encoder.encode_role)
    return kind.open_view(encoder, settings)


class RerankView(SearchView):
    """The first stage's top ``k`` reranked by ``reranker`` (see the module's docstring)."""

    kind = PIPELINE

    def __init__(self, first: SharedSearch, reranker: View, k: int, variant: str, name: str) -> None:
        super().__init__(name)
        self.first, self.reranker, self.k, self.variant = first, reranker, k, variant

    def _search_in(self, request: SearchRequest) -> Ranked:
        relevant = None if request.context is None else request.context.relevant
        if self.variant == ALWAYS_RERANK_POSITIVES and relevant is None:
            raise InvalidInputError(
                f"{self.name}: the {ALWAYS_RERANK_POSITIVES} variant reranks each query's relevant documents "
                "too, and this task does not give them to the search (a BEIR folder and QQP do)"
            )
        _, first_ids = self.first.answer(request.at_depth(max(self.k, request.k)))
        candidates = [row[: self.k] for row in listed(first_ids)]
        facts: dict[str, float | int] = {}
        if relevant is not None:
            facts[f"first_stage/recall@{self.k}"] = _recall(candidates, relevant)
        if self.variant == ALWAYS_RERANK_POSITIVES:
            assert relevant is not None
            candidates, added = _with_positives(candidates, relevant, request.exclude)
            facts["positives_added"] = added
        scores = self._scores(request.queries, request.corpus, candidates, request.roles)
        facts.update({f"reranker/{name}": value for name, value in self.reranker.facts().items()})
        self._facts = facts
        return reranked(candidates, scores, request.k)

    def _scores(
        self, queries: Sequence[str], corpus: Sequence[str], candidates: list[np.ndarray], roles: Roles
    ) -> list[np.ndarray]:
        """The reranker's score of each query's candidates, asked a block of about ``DOC_BLOCK`` pairs
        at a time (a query's pairs together) so that memory holds one block of texts."""
        out: list[np.ndarray] = []
        start = 0
        while start < len(candidates):
            stop, size = start, 0
            while stop < len(candidates) and (size == 0 or size + len(candidates[stop]) <= DOC_BLOCK):
                size += len(candidates[stop])
                stop += 1
            left = [queries[q] for q in range(start, stop) for _ in candidates[q]]
            right = [corpus[int(d)] for q in range(start, stop) for d in candidates[q]]
            flat = self.reranker.pairs(left, right, roles) if left else np.zeros(0)
            offsets = np.cumsum([0, *(len(candidates[q]) for q in range(start, stop))])
            out.extend(flat[offsets[i] : offsets[i + 1]] for i in range(stop - start))
            start = stop
        return out


def _recall(candidates: list[np.ndarray], relevant: Sequence[Any]) -> float:
    """The mean over queries of the share of their relevant documents among ``candidates`` (x100)."""
    shares = [len(set(map(int, row)) & set(rel)) / len(rel) for row, rel in zip(candidates, relevant) if len(rel)]
    return 100.0 * float(np.mean(shares)) if shares else 0.0


def _with_positives(
    candidates: list[np.ndarray], relevant: Sequence[Any], exclude: Any
) -> tuple[list[np.ndarray], int]:
    """Each query's candidates followed by its relevant documents they lack (in corpus order; never
    the query's excluded document), and how many were added in all."""
    out, added = [], 0
    for i, (row, rel) in enumerate(zip(candidates, relevant)):
        banned = -1 if exclude is None else int(exclude[i])
        missing = sorted(set(map(int, rel)) - set(map(int, row)) - {banned})
        added += len(missing)
        out.append(np.concatenate([row, np.asarray(missing, dtype=np.int64)]))
    return out, added


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """A pipeline's view: its first stage through the run's shared searches and its reranker's view
    of pairs; for the first stage alone (``Pipeline.stages``), the shared first stage itself."""
    model: Pipeline = held_model(encoder, Pipeline, KIND)
    first = search_view(model.first, settings)
    if model.reranker is None:
        return first
    return RerankView(first, pair_view(model.reranker, settings), model.k, model.variant, model.name)


KIND = ModelKind(
    name=PIPELINE,
    title="a two-stage pipeline",
    offers=frozenset({SEARCH}),
    gives="a first stage's top k of a corpus, reranked by a second model",
    similarity="the reranker's score of the first stage's top k",
    open_view=open_view,
)
