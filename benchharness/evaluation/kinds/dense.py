"""The dense kind: one vector per text. Its vectors come from the runner's shared encoding pass
(``evaluation.runner``, through the embedding cache), and tasks score them by cosine
(``scoring.views.DenseView``): every task of the suite runs on it."""

from __future__ import annotations

from benchharness.core.kinds import DENSE, PAIRS, SEARCH, VECTORS, ModelKind

KIND = ModelKind(
    name=DENSE,
    title="a dense encoder",
    offers=frozenset({VECTORS, PAIRS, SEARCH}),
    gives="one vector per text",
    similarity="cosine",
)
