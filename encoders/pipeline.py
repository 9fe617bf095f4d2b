"""Models made of other models, for retrieval: a two-stage pipeline (a first stage's top ``k``
reranked by a second model) and a reciprocal-rank fusion of first stages. The resolver builds them
from their names (``evaluation.pipeline_names``); their kinds' views search with them
(``evaluation.kinds.pipeline``, ``evaluation.kinds.fusion``). A model here holds its parts and pins
them: its identity is theirs, with the depth and protocol that decide what it ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchharness.core.encoder import Encoder
from benchharness.core.kind_models import KindModel
from benchharness.core.kinds import FUSION, PIPELINE

#: the reranking protocols: which documents the second stage reranks
CANDIDATES = "candidates"
ALWAYS_RERANK_POSITIVES = "always_rerank_positives"
RERANK_PROTOCOLS = {
    CANDIDATES: "the first stage's top k only: a relevant document it missed stays missed",
    ALWAYS_RERANK_POSITIVES: "the first stage's top k and every relevant document it missed, as "
    "sentence-transformers' CrossEncoderRerankingEvaluator does by default (always_rerank_positives=True): "
    "it credits the reranker with the first stage's misses",
}


def reranks_misses(protocol: Mapping[str, Any]) -> bool:
    """Whether a result's ``protocol`` is a pipeline's ``always_rerank_positives`` variant (the
    reports mark such a score wherever they show it)."""
    return str(protocol.get("variant", "")).endswith(f"+{ALWAYS_RERANK_POSITIVES}")


#: the reciprocal-rank constant (sentence-transformers' ReciprocalRankFusionEvaluator and mteb's hybrid
#: search both use 60, after Cormack et al. 2009)
RRF_K = 60
#: how deep each fused first stage is searched at least: mteb's hybrid search's default (``sub_model_top_k``)
RRF_DEPTH = 100


class Pipeline(KindModel):
    """``first``'s top ``k`` of each query reranked by ``reranker`` (a model that scores pairs), under
    the reranking protocol ``variant`` (``RERANK_PROTOCOLS``). With no ``reranker``, the first stage
    alone as the pipeline sees it, its lists shared with the pipelines of the run: what a pipeline's
    result reports beside its own scores (``stages``)."""

    model_kind = PIPELINE

    def __init__(self, name: str, first: Encoder, reranker: Encoder | None, k: int, variant: str = CANDIDATES) -> None:
        super().__init__(name)
        self.first, self.reranker, self.k, self.variant = first, reranker, k, variant
        self.similarity = (
            "the first stage's own score"
            if reranker is None
            else f"{reranker.similarity}, of the first stage's top {k} ({first.similarity} there)"
        )

    @property
    def pinned(self) -> bool:
        return self.first.pinned and (self.reranker is None or self.reranker.pinned)

    def identity_info(self) -> dict[str, Any]:
        if self.reranker is None:
            return {"family": "first-stage", "first_stage": self.first.identity_record()}
        return {
            "family": "pipeline",
            "first_stage": self.first.identity_record(),
            "reranker": self.reranker.identity_record(),
            "k": self.k,
            "variant": self.variant,
        }

    @property
    def metadata(self) -> dict[str, Any]:
        stages = {"first_stage": self.first.name, **({"reranker": self.reranker.name} if self.reranker else {})}
        return {**super().metadata, **stages}

    def stages(self) -> dict[str, Encoder]:
        if self.reranker is None:
            return {}
        return {"first_stage": Pipeline(self.first.name, self.first, None, self.k)}

    def protocol_details(self, variant: str) -> dict[str, Any]:
        if self.reranker is None:
            return {}
        renamed = {"variant": f"{variant}+{ALWAYS_RERANK_POSITIVES}"} if self.variant == ALWAYS_RERANK_POSITIVES else {}
        return {
            **renamed,
            "first_stage": self.first.name,
            "reranker": self.reranker.name,
            "rerank_depth": self.k,
            "reranked": RERANK_PROTOCOLS[self.variant],
        }


class Fusion(KindModel):
    """Reciprocal-rank fusion of first stages: a document's score is the sum over ``members`` of
    ``1 / (RRF_K + its rank there)`` (ranks from 1; a member that did not list it adds nothing), each
    member searched to ``max(k, RRF_DEPTH)``."""

    model_kind = FUSION
    similarity = f"reciprocal-rank fusion (sum of 1/({RRF_K} + rank))"

    def __init__(self, name: str, members: list[Encoder]) -> None:
        super().__init__(name)
        self.members = members

    @property
    def pinned(self) -> bool:
        return all(m.pinned for m in self.members)

    def identity_info(self) -> dict[str, Any]:
        return {
            "family": "rrf",
            "members": [m.identity_record() for m in self.members],
            "rrf_k": RRF_K,
            "depth": f"max(k, {RRF_DEPTH})",
        }

    @property
    def metadata(self) -> dict[str, Any]:
        return {**super().metadata, "members": [m.name for m in self.members]}
