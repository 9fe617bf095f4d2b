"""The run-file kind: a TREC run file's ranked lists (``encoders.run_file``), found by the task's
query and document ids. It searches a corpus that has ids (a BEIR folder, an mteb retrieval task)
and is a first stage of a pipeline; it scores no pair and gives no vector."""

from __future__ import annotations

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import SearchModel
from benchharness.core.kinds import RUN_FILE, SEARCH, ModelKind, View, ViewSettings
from benchharness.evaluation.kinds import held_model


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    return held_model(encoder, SearchModel, KIND).view(settings)


KIND = ModelKind(
    name=RUN_FILE,
    title="a run file",
    offers=frozenset({SEARCH}),
    gives="ranked lists read from a TREC run file, by query and document id",
    similarity="the run file's scores",
    open_view=open_view,
)
