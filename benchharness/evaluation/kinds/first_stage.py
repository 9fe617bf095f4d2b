"""A first stage as the pipelines of a run see it: any model whose kind searches a corpus (a dense,
sparse or multi-vector encoder, BM25, a run file, a fusion, a pipeline), its searches shared.

The run holds one ``Searches`` (``ViewSettings.searches``, made by the runner for the run and
dropped with it): the top lists each first stage gave, keyed by the model's identity, the roles, the
texts of the queries and the corpus, the exclusions and the task's ids. A pipeline asks its first
stage for as deep a list as any pipeline of the run reranks of it (``first_stage_depths`` of the
run's names), so that one search serves every reranker and every ``k`` over it, and the first
stage's own metrics beside each pipeline's; a smaller list is a prefix of a deeper one (the lists
are exact, and a prefix of an exact top list is the exact shorter list). Outside a run (no
``Searches``), each view keeps its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.kinds import SEARCH, KindMismatchError, Ranked, SearchRequest, SearchView, View, ViewSettings
from benchharness.evaluation.kinds import kind_of

logger = logging.getLogger(__name__)
#: the lists of texts whose digests are kept (a task's queries, corpus and ids, and the next task's)
DIGESTS_KEPT = 8


@dataclass
class _Listed:
    ranked: Ranked
    facts: dict[str, float | int]


class Searches:
    """First stages' top lists of one run (see the module's docstring); ``searched`` counts the
    searches that ran, ``served`` those answered from a list already made."""

    def __init__(self, depths: Mapping[str, int] | None = None) -> None:
        #: by first stage name, the deepest list a pipeline of the run reranks
        self.depths = dict(depths or {})
        self._lists: dict[Hashable, _Listed] = {}
        #: the digests of the last lists of texts seen, by object: a task asks with the same lists every time
        self._digests: dict[int, tuple[Sequence[Any], str]] = {}
        self.searched = 0
        self.served = 0

    def digest(self, texts: Sequence[Any]) -> str:
        """``digest(texts)``, computed once per list object while it is among the last ``DIGESTS_KEPT``
        (each is held meanwhile, so that its id stays its own)."""
        held = self._digests.get(id(texts))
        if held is None or held[0] is not texts:
            held = self._digests[id(texts)] = (texts, digest(texts))
            while len(self._digests) > DIGESTS_KEPT:  # the oldest list is let go
                del self._digests[next(iter(self._digests))]
        return held[1]

    def depth(self, name: str, asked: int) -> int:
        """How deep to search ``name`` when ``asked`` for ``asked`` documents."""
        return max(asked, self.depths.get(name, 0))

    def find(self, key: Hashable, k: int) -> _Listed | None:
        listed = self._lists.get(key)
        if listed is None or listed.ranked[1].shape[1] < k:
            return None
        self.served += 1
        scores, ids = listed.ranked
        return _Listed((scores[:, :k], ids[:, :k]), listed.facts)

    def keep(self, key: Hashable, listed: _Listed) -> None:
        self.searched += 1
        self._lists[key] = listed


def digest(texts: Sequence[Any]) -> str:
    """sha256 of a list of texts (or ids), one-to-one."""
    blob = json.dumps(list(texts), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()


class SharedSearch(SearchView):
    """``model``'s view (``inner``) whose searches go through the run's ``searches``; ``facts``: what
    the first stage reported of the search that made its lists (its index's bytes)."""

    def __init__(self, model: Encoder, inner: View, searches: Searches) -> None:
        super().__init__(model.name)
        self.model, self.inner, self.searches = model, inner, searches
        self.kind = inner.kind

    def _search_in(self, request: SearchRequest) -> Ranked:
        key = self._key(request)
        k = request.k
        listed = self.searches.find(key, k)
        if listed is None:
            depth = self.searches.depth(self.model.name, k)
            started = time.perf_counter()
            ranked = self.inner.answer(request.at_depth(depth))
            listed = _Listed(ranked, self.inner.facts())
            self.searches.keep(key, listed)
            logger.info(
                "[%s] first stage: %d queries searched in %d documents, top %d kept for the run (%.1f s)",
                self.model.name,
                len(request.queries),
                len(request.corpus),
                depth,
                time.perf_counter() - started,
            )
            listed = _Listed((ranked[0][:, :k], ranked[1][:, :k]), listed.facts)
        self._facts = listed.facts
        return listed.ranked

    def _key(self, request: SearchRequest) -> Hashable:
        """What decides a first stage's lists: the model (an unpinned one is only itself), the roles,
        the texts, the exclusions, and the ids a run file answers by (not the depth: a shallower list
        is a prefix of a deeper one)."""
        model = self.model.identity if self.model.pinned else f"unpinned {id(self.model)}"
        exclude, context = request.exclude, request.context
        excluded = None if exclude is None else hashlib.sha256(np.asarray(exclude, dtype=np.int64).tobytes()).digest()
        ids = (
            None
            if context is None
            else tuple(
                None if side is None else self.searches.digest(side) for side in (context.query_ids, context.corpus_ids)
            )
        )
        texts = (self.searches.digest(request.queries), self.searches.digest(request.corpus))
        return (model, request.roles, *texts, excluded, ids)


def search_view(encoder: Encoder, settings: ViewSettings) -> SharedSearch:
    """``encoder`` as a first stage: its kind's view (a dense encoder's: exact cosine search of its
    vectors, a corpus block at a time), its searches through the run's memo. A model whose kind does
    not search (a cross-encoder) is refused in one line."""
    kind = kind_of(encoder)
    if SEARCH not in kind.offers:
        raise KindMismatchError(
            f"{encoder.name} is {kind.title} ({kind.gives}) and cannot be a first stage, which searches a whole "
            "corpus; put it after >> to rerank a first stage's candidates"
        )
    if encoder.calibrated_per_task:
        raise KindMismatchError(
            f"{encoder.name} calibrates its codes on each task's own vectors and cannot be a first stage; "
            "quantize with a fixed calibration or search with the float vectors"
        )
    if kind.open_view is None:
        from benchharness.scoring.views import DenseView

        inner: View = DenseView(encoder.encode_role)
    else:
        inner = kind.open_view(encoder, settings)
    return SharedSearch(encoder, inner, settings.searches if settings.searches is not None else Searches())
