"""All-but-the-top (Mu & Viswanath, ICLR 2018): remove the mean and the top ``d`` principal
directions of a fit corpus's vectors, x' = (x - mu) - sum_i (u_i . (x - mu)) u_i."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.encoders.postprocess.fitting import DEFAULT_FIT, FitCorpus, PostProcessor


class AllButTheTop(PostProcessor):
    """All-but-the-top (Mu & Viswanath 2018): remove the mean and top d principal directions; d, fit."""

    kind = "abtt"

    def __init__(
        self, base: Encoder, name: str, d: int = 2, fit: str = DEFAULT_FIT, data_dir: str | Path | None = None
    ) -> None:
        super().__init__(base, name)
        self.d = int(d)
        self.fit_corpus = FitCorpus(fit, data_dir)
        self.mu: np.ndarray | None = None
        self.top: np.ndarray | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {"d": self.d}

    def corpora(self) -> dict[str, FitCorpus]:
        return {"fit": self.fit_corpus}

    @classmethod
    def recorded_width(cls, params: Mapping[str, Any], step: Mapping[str, Any], width: int | None) -> int | None:
        return width  # the base's: an exported model (benchharness export mteb) states it

    def _fit(self) -> None:
        x = np.asarray(self.base.encode(self.fit_corpus.sentences), dtype=np.float64)
        self.mu = x.mean(axis=0)
        _, _, vt = np.linalg.svd(x - self.mu, full_matrices=False)
        self.top = vt[: self.d]

    def _transform(self, sentences: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        assert self.mu is not None and self.top is not None
        centred = np.asarray(vectors, dtype=np.float64) - self.mu
        return centred - (centred @ self.top.T) @ self.top
