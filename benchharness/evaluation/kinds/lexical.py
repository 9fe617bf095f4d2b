"""The lexical kind: BM25 over the corpus's term statistics (``encoders.bm25``, by ``bm25s``). It
searches a corpus and gives neither a vector nor a score for a pair on its own (a BM25 score needs
the corpus's statistics), so it runs retrieval tasks and is a first stage of a pipeline; every
other task is refused before anything is scored."""

from __future__ import annotations

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import SearchModel
from benchharness.core.kinds import LEXICAL, SEARCH, ModelKind, View, ViewSettings
from benchharness.evaluation.kinds import held_model


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    return held_model(encoder, SearchModel, KIND).view(settings)


KIND = ModelKind(
    name=LEXICAL,
    title="a lexical model",
    offers=frozenset({SEARCH}),
    gives="BM25 scores of a corpus's documents, from its term statistics",
    similarity="BM25",
    open_view=open_view,
)
