"""The sparse kind (SPLADE): one vocabulary-sized vector per text, few of its terms active, scored
by the model's similarity (dot product; cosine when the model says so). It runs STS and pair tasks,
reranking and retrieval (``scoring.sparse.SparseView``: exact search by sparse products, a corpus
block at a time) and reports what sentence-transformers' sparse evaluators report (active
dimensions, sparsity ratios, FLOPS) beside the corpus's bytes; it gives no dense vectors, so tasks
that train a classifier, cluster or quantize are refused before anything is encoded."""

from __future__ import annotations

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import SparseModel
from benchharness.core.kinds import PAIRS, SEARCH, SPARSE, ModelKind, View, ViewSettings


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    """A ``SparseView`` whose rows are the model's ``encode_sparse``, through the kind's cache."""
    from benchharness.evaluation.kinds import held_model
    from benchharness.evaluation.kinds.outputs import by_role
    from benchharness.evaluation.row_codecs import SPARSE_ROWS
    from benchharness.scoring.sparse import SparseView

    model: SparseModel = held_model(encoder, SparseModel, KIND)
    encode = by_role(model, SPARSE_ROWS, settings.cache_dir, model.encode_sparse)
    return SparseView(encode, model.similarity, settings.memory_mib)


KIND = ModelKind(
    name=SPARSE,
    title="a sparse encoder",
    offers=frozenset({PAIRS, SEARCH}),
    gives="one vocabulary-sized vector per text, few terms active",
    similarity="dot product of sparse vectors",
    open_view=open_view,
)
