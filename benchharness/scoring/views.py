"""The dense view of a model: vectors, cosine for pairs, exact cosine search; what every task of the
suite has always computed, now behind the ``core.kinds.View`` contract so that a task written once
scores every kind of model that offers what it uses.

A task is handed a view by the runner, or a plain ``embed`` function by a test or an older caller;
``as_view`` accepts both, so a task's code is the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from benchharness.core.kinds import DENSE, Ranked, Roles, View
from benchharness.core.prompts import DEFAULT, Role
from benchharness.core.task import Embed
from benchharness.scoring.metrics import paired_cosine
from benchharness.scoring.top_k import DOC_BLOCK, normalise, top_k


class DenseView(View):
    """Vectors from ``embed``; pairs by cosine (a zero vector scoring 0), search by exact cosine,
    one block of ``DOC_BLOCK`` documents embedded and searched at a time."""

    kind = DENSE

    def __init__(self, embed: Embed) -> None:
        self._embed = embed
        self._index_bytes: int | None = None

    def __call__(self, sentences: list[str], role: Role = DEFAULT, /) -> np.ndarray:
        # the default role is asked as symmetric tasks always asked it, so that a one-argument
        # function (``encoder.encode``) serves them as before
        return self._embed(sentences) if role == DEFAULT else self._embed(sentences, role)

    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles) -> np.ndarray:
        return paired_cosine(self(list(left), roles[0]), self(list(right), roles[1]))

    def _search(self, queries: Sequence[str], corpus: Sequence[str], k: int, roles: Roles, exclude: Any) -> Ranked:
        query_vectors = self(list(queries), roles[0])

        def blocks() -> Iterator[np.ndarray]:
            for start in range(0, len(corpus), DOC_BLOCK):
                yield normalise(self(list(corpus[start : start + DOC_BLOCK]), roles[1]))

        self._index_bytes = 4 * len(corpus) * query_vectors.shape[1]
        return top_k(normalise(query_vectors), blocks(), k, exclude=exclude)

    def facts(self) -> dict[str, float | int]:
        """The bytes the last corpus searched takes as float32 vectors (``index_bytes``)."""
        return {} if self._index_bytes is None else {"index_bytes": self._index_bytes}


def as_view(embed: Embed | View) -> View:
    """The view a task scores with: the runner's view itself, or a plain ``embed`` function seen as
    a dense model."""
    return embed if isinstance(embed, View) else DenseView(embed)
