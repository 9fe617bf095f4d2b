"""The sparse kind (SPLADE): one vocabulary-sized vector per text, few of its terms active, scored
by the model's similarity (dot product; cosine when the model says so). It runs STS and pair tasks,
reranking and retrieval (``scoring.sparse.SparseView``: exact search by sparse products, a corpus
block at a time) and reports what sentence-transformers' sparse evaluators report (active
dimensions, sparsity ratios, FLOPS) beside the corpus's bytes; it gives no dense vectors, so tasks
that train a classifier, cluster or quantize are refused before anything is encoded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchharness.core.encoder import Encoder, WrappingEncoder
from benchharness.core.kind_models import SparseModel
from benchharness.core.kinds import PAIRS, SEARCH, SPARSE, KindMismatchError, ModelKind, View, ViewSettings
from benchharness.core.prompts import Role

if TYPE_CHECKING:
    from benchharness.evaluation.kinds.outputs import Outputs


def sparse_model(encoder: Encoder) -> SparseModel:
    """The sparse model under ``encoder`` (the run hands it wrapped in the embedding cache)."""
    model = encoder
    while isinstance(model, WrappingEncoder):
        model = model.wrapped
    if not isinstance(model, SparseModel):
        raise KindMismatchError(f"{encoder.name} is {type(model).__name__}, not a sparse model")
    return model


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """A ``SparseView`` whose rows are the model's ``encode_sparse``, through the kind's cache: each
    text is encoded once per role and identity, and read back on a later run."""
    from benchharness.evaluation.kinds.outputs import Outputs
    from benchharness.evaluation.row_codecs import SPARSE_ROWS
    from benchharness.scoring.sparse import SparseView

    model = sparse_model(encoder)
    outputs: dict[Role, Outputs] = {}

    def encode(sentences: Sequence[str], role: Role) -> Any:
        if role not in outputs:
            outputs[role] = Outputs(model, role, SPARSE_ROWS, settings.cache_dir)
        return outputs[role].get(
            sentences, lambda positions: model.encode_sparse([sentences[i] for i in positions], role)
        )

    return SparseView(encode, model.similarity_fn, settings.memory_mib)


KIND = ModelKind(
    name=SPARSE,
    title="a sparse encoder",
    offers=frozenset({PAIRS, SEARCH}),
    gives="one vocabulary-sized vector per text, few terms active",
    similarity="dot product of sparse vectors",
    open_view=open_view,
)
