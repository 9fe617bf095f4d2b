"""The multi-vector kind (late interaction, ColBERT): one vector per token, a query scoring a document
by MaxSim (each query token's best match among the document's tokens, summed; divided by the query's
token count when the model was trained so). It runs STS and pair tasks, reranking and retrieval
(``scoring.maxsim.MultiVectorView``: exact MaxSim search, a corpus block at a time within the run's
memory bound) and reports the bytes the corpus's token vectors take; it gives no one vector per text,
so tasks that train a classifier, cluster or quantize are refused before anything is encoded."""

from __future__ import annotations

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import MultiVectorModel
from benchharness.core.kinds import MULTI_VECTOR, PAIRS, SEARCH, ModelKind, View, ViewSettings


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """A ``MultiVectorView`` whose token vectors are the model's ``encode_tokens``, through the kind's
    cache. The view asks for a block of texts at a time, and so does the cache: no more of the corpus
    is held."""
    from benchharness.evaluation.kinds import held_model
    from benchharness.evaluation.kinds.outputs import by_role
    from benchharness.evaluation.row_codecs import TOKEN_ROWS
    from benchharness.scoring.maxsim import MultiVectorView

    model: MultiVectorModel = held_model(encoder, MultiVectorModel, KIND)
    encode = by_role(model, TOKEN_ROWS, settings.cache_dir, model.encode_tokens)
    return MultiVectorView(encode, model.length_normalized, settings.memory_mib)


KIND = ModelKind(
    name=MULTI_VECTOR,
    title="a multi-vector encoder",
    offers=frozenset({PAIRS, SEARCH}),
    gives="one vector per token",
    similarity="MaxSim over token vectors",
    open_view=open_view,
)
