"""The fusion kind: reciprocal-rank fusion of first stages, ``rrf(A,B,...)`` (``encoders.pipeline.Fusion``).

Each member is searched as a first stage (``first_stage.search_view``: its kind's exact search,
shared with the run's pipelines) to ``max(k, RRF_DEPTH)``, as mteb's hybrid search does; a document
scores the sum over members of ``1 / (60 + its rank there)`` (sentence-transformers'
``ReciprocalRankFusionEvaluator`` and mteb's ``fuse_rrf``: ranks from 1, unweighted), and the fused
lists are ordered by that score, ties by corpus order. A fusion searches, so it is a first stage of a
pipeline like any other (``rrf(A,B)>>RERANKER?k=K``). Beside the task's metrics it reports each
member's facts under ``<member>/``.
"""

from __future__ import annotations

from benchharness.core.encoder import Encoder
from benchharness.core.kinds import FUSION, SEARCH, ModelKind, Ranked, SearchRequest, SearchView, View, ViewSettings
from benchharness.encoders.pipeline import RRF_DEPTH, RRF_K, Fusion
from benchharness.evaluation.kinds import held_model
from benchharness.evaluation.kinds.first_stage import SharedSearch, search_view
from benchharness.scoring.ranked_lists import reciprocal_rank_fusion


class FusionView(SearchView):
    """The members' lists fused by reciprocal rank (see the module's docstring)."""

    kind = FUSION

    def __init__(self, members: list[SharedSearch], name: str) -> None:
        super().__init__(name)
        self.members = members

    def _search_in(self, request: SearchRequest) -> Ranked:
        deeper = request.at_depth(max(request.k, RRF_DEPTH))
        lists = [member.answer(deeper)[1] for member in self.members]
        self._facts = {
            f"{member.model.name}/{key}": value for member in self.members for key, value in member.facts().items()
        }
        return reciprocal_rank_fusion(lists, RRF_K, request.k)


def open_view(encoder: Encoder, settings: ViewSettings) -> View:
    model: Fusion = held_model(encoder, Fusion, KIND)
    return FusionView([search_view(member, settings) for member in model.members], model.name)


KIND = ModelKind(
    name=FUSION,
    title="a fusion of first stages",
    offers=frozenset({SEARCH}),
    gives="first stages' top lists fused by reciprocal rank",
    similarity=f"reciprocal-rank fusion, sum of 1/({RRF_K} + rank)",
    open_view=open_view,
)
