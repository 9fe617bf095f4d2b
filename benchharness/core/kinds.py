"""Kinds of model: what a model gives for a text, and so which tasks it can run.

The field ships four kinds, each with its own way of scoring a query against a document:

- **dense**: one vector per text, compared by cosine (every task of the suite);
- **sparse** (SPLADE): one vocabulary-sized vector per text with a few dozen active terms, compared
  by dot product and searched like an inverted index;
- **multi-vector** (ColBERT, late interaction): one vector per token, compared by MaxSim;
- **cross-encoder**: no vector at all, a score for each (query, document) pair read together.

A task declares the operations its evaluation uses (``Task.takes``): ``vectors`` (rows to train a
classifier on, cluster or put in a quantized index), ``pairs`` (a score for each text pair: STS,
reranking) or ``search`` (each query's best documents of a corpus: retrieval). A kind offers some of
them; a task whose operations a kind does not all offer is refused before anything is encoded, in
one line naming both (``refusal``). The runner hands each task a ``View`` of its model: the dense
kind's view serves vectors and scores by cosine exactly as the tasks always have, the others score
as their own evaluators in sentence-transformers score.

Kinds are plugins (``benchharness.model_kinds``): a ``ModelKind`` names what it offers and how the
runner opens a view of one of its models. The built-in ones are declared in ``pyproject.toml``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Role

if TYPE_CHECKING:
    import numpy as np

#: the roles of a pair's two sides
Roles = tuple[Role, Role]
#: each query's top documents: (scores, corpus indices), one row per query, best first
Ranked = tuple["np.ndarray", "np.ndarray"]

#: rows of numbers, one per text: what a classifier is trained on, what is clustered or quantized
VECTORS = "vectors"
#: a score for each (left, right) text pair: STS, pair classification, reranking a candidate list
PAIRS = "pairs"
#: each query's best documents of a corpus, with their scores: retrieval
SEARCH = "search"
#: what each operation means, for messages
OPERATIONS = {
    VECTORS: "vectors (to train a classifier on, cluster or index)",
    PAIRS: "a score for each text pair",
    SEARCH: "a search of the whole corpus",
}

#: the built-in kinds' names
DENSE, SPARSE, MULTI_VECTOR, CROSS_ENCODER = "dense", "sparse", "multi-vector", "cross-encoder"
#: the kinds that search a corpus without a vector of their own: BM25, a run file's lists, two stages, a fusion
LEXICAL, RUN_FILE, PIPELINE, FUSION = "lexical", "run-file", "pipeline", "fusion"
#: how a cross-encoder compares two texts, for results' protocols and its metadata
PAIR_SCORE = "the model's pair score"


class KindMismatchError(UserError):
    """A model of a kind that cannot run a task (a cross-encoder has no vector to cluster), or a
    stage that cannot wrap it (whitening needs dense vectors)."""


@dataclass(frozen=True)
class ViewSettings:
    """What a run tells a kind's view beside the model: where its outputs are cached (None: in
    memory for the call only), how much memory a corpus block may take, and the run's memo of first
    stages' top lists (``evaluation.kinds.first_stage.Searches``: a first stage that several
    pipelines of one run share searches once; None: each view searches for itself)."""

    cache_dir: Any = None  # a Path; typed loosely so that the contract needs no pathlib at import
    memory_mib: float = 1024.0
    searches: Any = None


@dataclass(frozen=True)
class SearchContext:
    """What a retrieval task knows of a search beside its texts, handed to ``View.search``: the ids
    of its queries and documents (a BEIR folder's, an mteb task's: a first stage read from a run file
    answers by them) and each query's relevant documents, as corpus indices (what a reranking
    protocol that adds the positives a first stage missed needs, and a pipeline's ceiling). A field
    a task cannot give is None."""

    query_ids: Sequence[str] | None = None
    corpus_ids: Sequence[str] | None = None
    relevant: Sequence[Collection[int]] | None = None


@dataclass(frozen=True)
class SearchRequest:
    """One search as ``View.search`` was asked it, held as one value: what a view that searches
    through others (a pipeline's first stage, a fusion's members, the run's shared first stage)
    receives and passes on, at the depth it needs (``at_depth``)."""

    queries: Sequence[str]
    corpus: Sequence[str]
    k: int
    roles: Roles = (QUERY, DOCUMENT)
    exclude: Any = None
    context: SearchContext | None = None

    def at_depth(self, k: int) -> SearchRequest:
        """The same search, ``k`` documents deep."""
        return replace(self, k=k)


@dataclass(frozen=True)
class ModelKind:
    """A ``model_kinds`` plugin: a kind of model, what it offers and how a run scores with it.

    ``open_view(encoder, settings)`` gives the ``View`` a task of one run is handed; None for the
    dense kind, whose vectors come from the runner's shared encoding pass (one pass for every task
    of a run, through the embedding cache)."""

    name: str
    #: the kind with its article, for messages ("a cross-encoder")
    title: str
    offers: frozenset[str]
    #: what the model gives for a text, for messages and documentation ("one vector per token")
    gives: str
    #: how a (query, document) pair is scored, recorded in each result's protocol
    similarity: str
    open_view: Callable[[Any, ViewSettings], View] | None = None

    def refusal(self, encoder: str, task: str, takes: frozenset[str]) -> str | None:
        """Why a model of this kind cannot run a task that uses ``takes``, in one line; None when it can."""
        missing = sorted(takes - self.offers)
        if not missing:
            return None
        needs = " and ".join(OPERATIONS.get(op, op) for op in missing)
        offers = " and ".join(OPERATIONS.get(op, op) for op in sorted(self.offers)) or "nothing a task uses"
        said = f"{encoder} is {self.title} ({self.gives}), and {task} needs {needs}; {self.title} gives {offers}. "
        if missing == [SEARCH] and PAIRS in self.offers:
            # what scores pairs reranks: the two-stage pipeline is the way such a model meets a corpus
            return said + (
                f"Rerank a first stage's top k with it instead: '<first stage>>>{encoder}?k=100' "
                f"(for example 'bm25>>{encoder}?k=100'; the first stage may be any encoder, bm25 or run:<file>)"
            )
        return said + "Run it on tasks that use what it gives, or choose a dense encoder for this one"


class View(ABC):
    """A model as a task sees it: ``pairs`` and ``search`` for every kind that offers them, and,
    for the dense kind, the vectors themselves (calling the view, as tasks call ``embed``).

    Scores are the kind's own similarity: cosine for dense vectors, the model's similarity function
    for sparse ones (dot product for SPLADE), MaxSim for token vectors, the model's pair score for a
    cross-encoder. Ties in ``search`` follow the shared rule: score descending, then corpus order."""

    kind: str = DENSE
    #: the operations this view answers (a cross-encoder's: pairs only)
    offers: frozenset[str] = frozenset({VECTORS, PAIRS, SEARCH})

    def __call__(self, sentences: list[str], role: Role = DEFAULT, /) -> np.ndarray:
        raise KindMismatchError(f"a {self.kind} model gives no dense vectors; this task needs them")

    def pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles = (DEFAULT, DEFAULT)) -> np.ndarray:
        """One float64 score for each pair ``(left[i], right[i])``, ``left`` taken in ``roles[0]``
        and ``right`` in ``roles[1]`` (a query and its candidates: ``(query role, DOCUMENT)``)."""
        if len(left) != len(right):
            raise InvalidInputError(f"{len(left)} left texts and {len(right)} right texts: pairs need one of each")
        return self._pairs(left, right, roles)

    def search(
        self,
        queries: Sequence[str],
        corpus: Sequence[str],
        k: int,
        roles: Roles = (QUERY, DOCUMENT),
        exclude: Any = None,
        context: SearchContext | None = None,
    ) -> Ranked:
        """Each query's ``k`` best corpus documents, exactly: (scores, corpus indices), best first,
        padded with score -inf and index -1 when the corpus is smaller; ``exclude[i]`` (an index or
        -1) never appears in query i's list. ``context``: what the task knows beside the texts (ids,
        relevance), for the views that use it."""
        return self.answer(SearchRequest(queries, corpus, k, roles, exclude, context))

    def answer(self, request: SearchRequest) -> Ranked:
        """``search`` of a request already made: how a view that searches through another passes it on."""
        if SEARCH not in self.offers:
            raise KindMismatchError(
                f"a {self.kind} model scores given pairs and cannot search a corpus of {len(request.corpus):,} "
                "documents; rerank a first stage's candidates instead (a reranking task)"
            )
        if request.context is not None:
            _check_context(request.context, len(request.queries), len(request.corpus))
        return self._search_in(request)

    @abstractmethod
    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles) -> np.ndarray:
        """``pairs``, once the two sides are known to be of one length."""

    def _search(self, queries: Sequence[str], corpus: Sequence[str], k: int, roles: Roles, exclude: Any) -> Ranked:
        """``search``, for a view whose kind offers it."""
        raise NotImplementedError

    def _search_in(self, request: SearchRequest) -> Ranked:
        """``search`` with the task's ``context``: a view that uses it (a run file's lists, found by
        ids; a pipeline, which may add the positives its first stage missed) overrides this; the others
        search by the texts alone."""
        return self._search(request.queries, request.corpus, request.k, request.roles, request.exclude)

    def facts(self) -> dict[str, float | int]:
        """What the kind reports beside a task's metrics, for what this view scored (a sparse
        model's active dimensions, a multi-vector model's bytes per document); none by default."""
        return {}


class SearchView(View):
    """A view that ranks a corpus and scores no given pair (BM25, a run file's lists, a pipeline, a
    fusion): ``facts`` are what its last search found (``_facts``); ``name`` names its model in messages."""

    offers = frozenset({SEARCH})

    def __init__(self, name: str) -> None:
        self.name = name
        self._facts: dict[str, float | int] = {}

    def _pairs(self, left: Sequence[str], right: Sequence[str], roles: Roles) -> np.ndarray:
        raise KindMismatchError(f"{self.name} ranks a corpus and scores no given pair")

    def facts(self) -> dict[str, float | int]:
        return dict(self._facts)


def _check_context(context: SearchContext, n_queries: int, n_corpus: int) -> None:
    """A context of as many ids and relevant sets as the search has queries and documents."""
    for what, given, texts, expected in (
        ("query ids", context.query_ids, "queries", n_queries),
        ("corpus ids", context.corpus_ids, "documents", n_corpus),
        ("relevant sets", context.relevant, "queries", n_queries),
    ):
        if given is not None and len(given) != expected:
            raise InvalidInputError(f"a search of {expected:,} {texts} was given {len(given):,} {what}")
