"""The kinds whose models search a corpus by themselves and give neither a vector nor a score for
a lone pair (``core.kind_models.SearchModel``, whose view is its own):

- ``lexical``: BM25 over the corpus's term statistics (``encoders.bm25``, by bm25s; a BM25 score
  needs the corpus's statistics, so no pair is scored alone);
- ``run-file``: a TREC run file's ranked lists (``encoders.run_file``), found by the task's query and
  document ids.

Each runs the tasks that search a corpus and is a first stage of a pipeline; every other task is
refused before anything is scored.
"""

from __future__ import annotations

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import SearchModel
from benchharness.core.kinds import LEXICAL, RUN_FILE, SEARCH, ModelKind, View, ViewSettings
from benchharness.evaluation.kinds import held_model, kind_of


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """The model's own view."""
    return held_model(encoder, SearchModel, kind_of(encoder)).view(settings)


LEXICAL_KIND = ModelKind(
    name=LEXICAL,
    title="a lexical model",
    offers=frozenset({SEARCH}),
    gives="BM25 scores of a corpus's documents, from its term statistics",
    similarity="BM25",
    open_view=open_view,
)
RUN_FILE_KIND = ModelKind(
    name=RUN_FILE,
    title="a run file",
    offers=frozenset({SEARCH}),
    gives="ranked lists read from a TREC run file, by query and document id",
    similarity="the run file's scores",
    open_view=open_view,
)
