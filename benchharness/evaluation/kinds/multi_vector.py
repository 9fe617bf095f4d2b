"""The multi-vector kind (late interaction, ColBERT): one vector per token, a query scoring a document
by MaxSim (each query token's best match among the document's tokens, summed; divided by the query's
token count when the model was trained so). It runs STS and pair tasks, reranking and retrieval
(``scoring.maxsim.MultiVectorView``: exact MaxSim search, a corpus block at a time within the run's
memory bound) and reports the bytes the corpus's token vectors take; it gives no one vector per text,
so tasks that train a classifier, cluster or quantize are refused before anything is encoded."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchharness.core.encoder import Encoder, WrappingEncoder
from benchharness.core.kind_models import MultiVectorModel
from benchharness.core.kinds import MULTI_VECTOR, PAIRS, SEARCH, KindMismatchError, ModelKind, View, ViewSettings
from benchharness.core.prompts import Role


def multi_vector_model(encoder: Encoder) -> MultiVectorModel:
    """The multi-vector model under ``encoder`` (the run hands it wrapped in the embedding cache)."""
    model = encoder
    while isinstance(model, WrappingEncoder):
        model = model.wrapped
    if not isinstance(model, MultiVectorModel):
        raise KindMismatchError(f"{encoder.name} is {type(model).__name__}, not a multi-vector model")
    return model


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """A ``MultiVectorView`` whose token vectors are the model's ``encode_tokens``, through the kind's
    cache: each text is encoded once per role and identity, and read back on a later run. The view
    asks for a block of texts at a time, and so does the cache: no more of the corpus is held."""
    from benchharness.evaluation.kinds.outputs import Outputs
    from benchharness.evaluation.row_codecs import TOKEN_ROWS
    from benchharness.scoring.maxsim import MultiVectorView

    model = multi_vector_model(encoder)
    outputs: dict[Role, Outputs] = {}

    def encode(sentences: Sequence[str], role: Role) -> list[np.ndarray]:
        if role not in outputs:
            outputs[role] = Outputs(model, role, TOKEN_ROWS, settings.cache_dir)
        rows: list[np.ndarray] = outputs[role].get(
            sentences, lambda positions: model.encode_tokens([sentences[i] for i in positions], role)
        )
        return rows

    return MultiVectorView(encode, model.length_normalized, settings.memory_mib)


KIND = ModelKind(
    name=MULTI_VECTOR,
    title="a multi-vector encoder",
    offers=frozenset({PAIRS, SEARCH}),
    gives="one vector per token",
    similarity="MaxSim over token vectors",
    open_view=open_view,
)
