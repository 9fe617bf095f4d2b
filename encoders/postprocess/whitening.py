"""BERT-whitening (Su et al. 2021): map a corpus's vectors to zero mean and identity covariance.

docs/PROTOCOLS.md: mu and W = U diag(1/sqrt(s)) from the SVD of the covariance of a fit corpus;
x' = (x - mu) W[:, :k]. Like Su et al.'s code the covariance is the unbiased one (``np.cov``,
divisor n - 1). Their code L2-normalises afterwards; every task here scores by cosine, for which
that is a no-op, so it is left out. Statistics are computed in float64.

The default k keeps every direction the fit corpus gives non-zero variance (eigenvalue above
1e-10 of the largest). Mean pooling after a LayerNorm leaves vectors in a hyperplane (LayerNorm
outputs sum to a constant across features), so e.g. paraphrase-MiniLM-L3-v2 spans 383 of its 384
dimensions: the last eigenvalue is ~1e-15 of the first, and scaling it by 1/sqrt(s) would blow
float noise up into a dominant coordinate. An explicit k beyond that rank is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT
from benchharness.encoders.postprocess.fitting import DEFAULT_FIT, FitCorpus, PostProcessor

#: eigenvalues at or below this fraction of the largest count as zero variance
RANK_TOLERANCE = 1e-10


def whitening_stats(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mu, W, s) of ``vectors``: W = U diag(1/sqrt(s)) with s sorted in decreasing order."""
    x = np.asarray(vectors, dtype=np.float64)
    mu = x.mean(axis=0)
    u, s, _ = np.linalg.svd(np.cov(x, rowvar=False))
    with np.errstate(divide="ignore"):
        w = u / np.sqrt(s)[None, :]
    return mu, w, s


class Whitening(PostProcessor):
    """BERT-whitening (Su et al. 2021): x' = (x - mu) W[:, :k]; k (default: the fit's rank),
    fit=<corpus> (default train-splits).

    mu and W are fitted on the corpus's vectors at the first encode.
    """

    kind = "whitening"

    def __init__(
        self, base: Encoder, name: str, k: int | None = None, fit: str = DEFAULT_FIT, data_dir: str | Path | None = None
    ) -> None:
        super().__init__(base, name)
        if k is not None and (not isinstance(k, int) or k < 1):
            raise InvalidInputError(f"{name}: whitening k must be a positive integer (kept dimensions), got {k!r}")
        self.k = k
        self.fit_corpus = FitCorpus(fit, data_dir)
        self.mu: np.ndarray | None = None
        self.kernel: np.ndarray | None = None
        self.dimensions: tuple[int, int] | None = None  # (kept, base) once fitted

    @property
    def params(self) -> dict[str, Any]:
        return {
            "k": self.k if self.k is not None else f"rank (eigenvalues > {RANK_TOLERANCE:g} x largest)",
            "covariance": "unbiased (n-1)",
        }

    @property
    def metadata(self) -> dict[str, Any]:
        meta = super().metadata
        if self.dimensions is not None:  # known once fitted (results are written after encoding)
            meta["post_processing"][-1]["dimensions_kept"] = list(self.dimensions)
        return meta

    def corpora(self) -> dict[str, FitCorpus]:
        return {"fit": self.fit_corpus}

    @classmethod
    def recorded_width(cls, params: Mapping[str, Any], step: Mapping[str, Any], width: int | None) -> int | None:
        """``k``; at the fit's rank, the dimensions kept that the fit recorded, else unknown."""
        if isinstance(params.get("k"), int):
            return int(params["k"])
        kept = step.get("dimensions_kept")
        return int(kept[0]) if isinstance(kept, list) and kept else None

    def _fit(self) -> None:
        vectors = self.base.encode_role(self.fit_corpus.sentences, DEFAULT)
        mu, w, s = whitening_stats(vectors)
        # a direction with (numerically) zero variance cannot be scaled to unit variance
        rank = int((s > s[0] * RANK_TOLERANCE).sum())
        k = rank if self.k is None else self.k
        if k > w.shape[1]:
            raise InvalidInputError(f"{self.name}: k={k} exceeds the base encoder's dimension {w.shape[1]}")
        if k > rank:
            raise InvalidInputError(
                f"{self.name}: the fit corpus {self.fit_corpus.name!r} spans only {rank} of the "
                f"{w.shape[1]} dimensions ({len(vectors)} sentences); use k<={rank} or a larger corpus"
            )
        self.mu, self.kernel = mu, w[:, :k]
        self.dimensions = (k, w.shape[1])

    def _transform(self, sentences: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        assert self.mu is not None and self.kernel is not None
        return (np.asarray(vectors, dtype=np.float64) - self.mu) @ self.kernel
