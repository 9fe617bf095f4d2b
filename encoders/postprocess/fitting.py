"""What post-processors share: a base encoder to wrap and the unlabeled corpus they fit on.

Fitting sees sentences only, never gold scores: corpora come from ``benchharness.data.corpora``, which
reads the text columns alone. Whether the corpus contains evaluation (test-split) sentences is a
choice with consequences (several papers fit on them; the numbers are then transductive), so the
default is ``train-splits`` (STS-B train + SICK train) and every fitted post-processor records its
corpus, a digest of the exact sentences, whether the corpus includes the evaluated test splits by
construction (``transductive``: ``sts-unlabeled`` does) and how many of its sentences also occur in
an STS test split. That count is large even for ``train-splits`` (11,734 of 15,320): STS-B's
sentences were drawn from STS12-16 and SICK reuses sentences across its splits, so an "inductive"
fit on STS data always sees many test sentences' text; no gold score ever enters a fit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError, DataRoot, default_data
from benchharness.core.encoder import Encoder, WrappingEncoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT, Role
from benchharness.data.corpora import CORPORA, load_corpus, sts_test_sentences

#: STS-B train + SICK train: no dev or test split by construction
DEFAULT_FIT = "train-splits"
#: corpora that include the evaluated test splits (unlabeled): fitting on them is transductive
TRANSDUCTIVE = frozenset({"sts-unlabeled"})


class FitCorpus:
    """A named corpus, read once and only when first needed, de-duplicated in first-seen order.

    Unique sentences: a sentence repeated across source files would otherwise weigh more in a
    mean or covariance for no reason but the corpus assembly.
    """

    def __init__(self, name: str, data_dir: str | Path | None = None) -> None:
        if not (name in CORPORA or name.startswith("text:")):
            raise InvalidInputError(f"unknown fit corpus {name!r}; known: {', '.join(CORPORA)}, or text:<path>")
        self.name = name
        self.data = DataRoot(data_dir) if data_dir is not None else default_data()

    @cached_property
    def sentences(self) -> list[str]:
        return load_corpus(self.name, self.data, unique=True)

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256("\n".join(self.sentences).encode("utf8")).hexdigest()

    @cached_property
    def test_overlap(self) -> int | None:
        """How many corpus sentences also occur in an STS test split (None when that data is absent)."""
        try:
            tests = sts_test_sentences(self.data)
        except DataError:
            return None
        return sum(s in tests for s in self.sentences)

    def identity(self) -> dict[str, Any]:
        return {"corpus": self.name, "sentences": len(self.sentences), "sha256": self.sha256}

    def describe(self) -> dict[str, Any]:
        """For result metadata: enough to see at a glance whether the fit was transductive."""
        transductive = None if self.name.startswith("text:") else self.name in TRANSDUCTIVE
        return {
            **self.identity(),
            "unique": True,
            "transductive": transductive,
            "test_sentence_overlap": self.test_overlap,
        }


class PostProcessor(WrappingEncoder):
    """An encoder that transforms the vectors of the encoder it wraps.

    Subclasses implement ``_transform`` (and ``_fit`` when they need corpus statistics) and list
    their parameters in ``params``; identity and metadata then chain through the base. Roles and
    prompts are the base's: the base encodes each role with its prompt, and the transform (fitted
    on the default role's vectors of the corpus) applies to every role alike.
    """

    kind = "postprocessor"

    def __init__(self, base: Encoder, name: str) -> None:
        super().__init__(name)
        if base.calibrated_per_task:
            raise InvalidInputError(
                f"{name}: a stage calibrated on each task ({base.name!r}) must come last; "
                "calibrate it on a corpus (calibration=<corpus>) to post-process its codes"
            )
        self.base = base
        self._fitted = False

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter that changes the output (the fit corpus is reported separately)."""
        return {}

    def corpora(self) -> dict[str, FitCorpus]:
        """Corpora this post-processor fits on, by role (``fit``, ``tfidf``)."""
        return {}

    @classmethod
    def recorded_width(cls, params: Mapping[str, Any], step: Mapping[str, Any], width: int | None) -> int | None:
        """The width of this stage's vectors as a stored result tells it: ``params`` from its identity,
        ``step`` from its metadata, ``width`` its base's (None: unknown). An export describes a model
        from its results without loading it; a post-processor that keeps or sets the width says so
        here, and one that does not say leaves the width unknown."""
        return None

    def _fit(self) -> None:
        """Compute corpus statistics; called once, at the first ``encode``."""

    def fit(self) -> None:
        if not self._fitted:
            self._fit()
            self._fitted = True

    def _transform(self, sentences: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def wrapped(self) -> Encoder:
        return self.base

    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        self.fit()
        vectors = self.base.encode_role(sentences, role)
        return np.asarray(self._transform(sentences, vectors), dtype=np.float32)

    def identity_info(self) -> dict[str, Any]:
        return {
            "postprocessor": self.kind,
            "params": self.params,
            **{role: c.identity() for role, c in self.corpora().items()},
            "base": self.base.identity_record(),
        }

    @property
    def metadata(self) -> dict[str, Any]:
        base = self.base.metadata
        step = {"name": self.kind, **self.params, **{role: c.describe() for role, c in self.corpora().items()}}
        return {**base, "class": type(self).__name__, "post_processing": [*base.get("post_processing", []), step]}
