"""Matryoshka truncation: keep the first ``d`` dimensions of the base encoder's vectors.

sentence-transformers' ``truncate_dim`` (``SentenceTransformer.encode``, ``EmbeddingSimilarityEvaluator``)
cuts the pooled vector before any normalisation; so does this stage, which ``+quantize`` may follow
(truncate, then L2-normalise, then quantize: that evaluator's encode path). Cheap to recompute, so
its vectors are not cached: the cache keeps the base's, which every ``d`` is cut from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.encoders.postprocess.fitting import PostProcessor


class Truncate(PostProcessor):
    """The first ``d`` dimensions of each vector."""

    kind = "truncate"

    def __init__(self, base: Encoder, name: str, d: int) -> None:
        super().__init__(base, name)
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise InvalidInputError(f"{name}: truncate takes d=<positive integer> (the dimensions kept), got {d!r}")
        self.d = d

    @property
    def cacheable(self) -> bool:
        return False

    @property
    def params(self) -> dict[str, Any]:
        return {"d": self.d}

    @classmethod
    def recorded_width(cls, params: Mapping[str, Any], step: Mapping[str, Any], width: int | None) -> int | None:
        d = params.get("d")
        return d if isinstance(d, int) else None

    def _transform(self, sentences: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors)
        if self.d > vectors.shape[1]:
            raise InvalidInputError(
                f"{self.name}: d={self.d} exceeds the {vectors.shape[1]} dimensions of {self.base.name!r}"
            )
        return vectors[:, : self.d]
