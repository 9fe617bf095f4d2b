"""The model side of the kinds of ``benchharness.core.kinds``: what a model of each kind other than
dense implements, so that its kind's view (``benchharness.evaluation.kinds``) can score with it.

A family that loads such a model (``st:`` on a folder whose ``model_type`` says so) builds one of
these; the runner never asks it for dense vectors, because a task that needs them is refused first.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchharness.core.encoder import Encoder
from benchharness.core.kinds import (
    CROSS_ENCODER,
    MULTI_VECTOR,
    PAIR_SCORE,
    SPARSE,
    KindMismatchError,
    View,
    ViewSettings,
)
from benchharness.core.prompts import DEFAULT, Role

if TYPE_CHECKING:
    import numpy as np


class KindModel(Encoder):
    """A model of a kind other than dense: it has an identity, a name, prompts and metadata as every
    encoder does, but no one vector per text; ``encode`` says so (the runner never asks it: a task
    that needs vectors is refused first)."""

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        raise KindMismatchError(f"{self.name} is a {self.model_kind} model: it gives no dense vectors")

    def identity_record(self) -> dict[str, Any]:
        return {**super().identity_record(), "kind": self.model_kind}

    def stages(self) -> dict[str, Encoder]:
        """Models whose scores on a task its result reports beside this model's, each metric under
        ``<name>/`` (a two-stage pipeline's first stage alone, under ``first_stage``); none by default."""
        return {}

    def protocol_details(self, variant: str) -> dict[str, Any]:
        """What this model adds to the protocol record of a result it scores, given the task's
        protocol ``variant`` (a pipeline names its stages and depth, and renames the variant when its
        reranking protocol is another one); nothing by default."""
        return {}


class SparseModel(KindModel):
    """A sparse encoder (SPLADE): one vocabulary-sized vector per text, few of its terms active."""

    model_kind = SPARSE
    #: how two vectors are compared (sentence-transformers' ``similarity_fn_name``): "dot" (SPLADE's) or "cosine"
    similarity = "dot"

    @abstractmethod
    def encode_sparse(self, sentences: Sequence[str], role: Role = DEFAULT) -> Any:
        """A ``scipy.sparse.csr_matrix`` of float32, one row per sentence, as encoded for ``role``."""

    @property
    @abstractmethod
    def vocabulary_size(self) -> int:
        """The width of its vectors."""


class MultiVectorModel(KindModel):
    """A late-interaction encoder (ColBERT): one vector per token, scored by MaxSim."""

    model_kind = MULTI_VECTOR
    #: "maxsim", or "meanmaxsim": MaxSim divided by the query's token count, for a model trained so
    similarity = "maxsim"

    @property
    def length_normalized(self) -> bool:
        return self.similarity == "meanmaxsim"

    @abstractmethod
    def encode_tokens(self, sentences: Sequence[str], role: Role = DEFAULT) -> list[np.ndarray]:
        """One float32 array (tokens x dimension) per sentence, as encoded for ``role``."""


class PairModel(KindModel):
    """A cross-encoder: a score for each (left, right) pair of texts, read together."""

    model_kind = CROSS_ENCODER
    #: what it compares two texts by, for results' protocols and its metadata
    similarity = PAIR_SCORE

    @abstractmethod
    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One float score per pair, in order (batching is the model's: see ``length_sorted_batches``)."""


class SearchModel(KindModel):
    """A model that searches a corpus by itself and gives no vector or pair score for a text: BM25
    over the corpus's term statistics, the lists of a run file. Its kind's view is its own."""

    @abstractmethod
    def view(self, settings: ViewSettings) -> View:
        """The view a task searches with (``View.search``), within the run's ``settings``."""
