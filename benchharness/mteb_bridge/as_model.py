"""A benchharness encoder as an mteb model, in the protocol mteb 2 takes a model of its kind in.

mteb keys its result cache on the model's name and revision, and silently serves a cached result
to any model with the same pair. So the name comes from the benchharness encoder name (a built-in,
a composition, a trained run or an ad-hoc spec) and the revision is the encoder identity, the
hash of everything that determines the vectors: two encoders that could give different vectors
never share a (name, revision), and a retrained or re-fitted model gets a new revision.

Which protocol (``mteb_model``): a dense encoder is mteb's ``EncoderProtocol`` (``MtebEncoder``:
vectors, which any mteb task takes). A model of another kind is scored through its kind's view
(``core.kinds.View``: the kind's own scoring, through its cache of outputs) and handed to mteb as
what mteb 2 evaluates such a model with, which only its retrieval tasks (retrieval, reranking,
instruction retrieval and reranking) take: a kind that searches a corpus (sparse, multi-vector) is
a ``SearchProtocol`` (``MtebSearchModel``: a full search, or each query's given candidates scored as
pairs), as mteb's own ``MultiVectorWrapper`` is and its ``SearchEncoderWrapper`` makes of a
``SparseEncoder``; a kind that scores pairs only (a cross-encoder) is a ``CrossEncoderProtocol``
(``MtebPairModel``), whose pairs mteb's ``SearchCrossEncoderWrapper`` builds from each query's
candidates, as it does for a sentence-transformers ``CrossEncoder``. The texts are the ones mteb's
dataloaders give its own wrappers (a document's title and text, a query with its instruction).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb._create_dataloaders import create_dataloader
from mteb.models import ModelMeta
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ScoringFunction
from mteb.types import PromptType

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import (
    CROSS_ENCODER,
    DENSE,
    MULTI_VECTOR,
    PAIRS,
    SEARCH,
    SPARSE,
    KindMismatchError,
    SearchContext,
    View,
    ViewSettings,
)
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Prompts, Role
from benchharness.core.results import slug
from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
from benchharness.evaluation.kinds import kind_of
from benchharness.mteb_bridge.model_facts import HUB_ID, ModelFacts, innermost

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import (
        BatchedInput,
        CorpusDatasetType,
        QueryDatasetType,
        RetrievalOutputType,
        TopRankedDocumentsType,
    )
    from torch.utils.data import DataLoader

#: organisation part of every exported or evaluated model name: keeps benchharness's encoders
#: apart from mteb's own registry entries for the same checkpoints (whose revisions are commits)
ORGANISATION = "benchharness"


def mteb_name(encoder_name: str) -> str:
    """``benchharness/<encoder name made path-safe>``: mteb maps ``/`` to ``__`` in folder names,
    so the encoder part must not contain one (``hf:org/model?...`` does)."""
    return f"{ORGANISATION}/{slug(encoder_name)}"


def hub_base(identity_info: Mapping[str, Any]) -> str | None:
    """The Hugging Face id an encoder was built from, when its identity names one (for
    ``ModelMeta.adapted_from``); local paths (trained runs) are not hub ids."""
    model = innermost(identity_info).get("model")  # post-processors nest the encoder they wrap
    return model if isinstance(model, str) and HUB_ID.fullmatch(model) else None


#: identity keys of a sentence-transformers model loaded as published, with no option of ours
_PLAIN_HUB_KEYS = {"hash", "family", "model", "revision", "weights_sha256", "modules"}
_COMMIT = re.compile(r"[0-9a-f]{40}")


def export_name(name: str, identity: str, identity_info: Mapping[str, Any]) -> tuple[str, str, str]:
    """(mteb name, revision, why) for exporting an encoder's results.

    A sentence-transformers model used as published (no post-processor, no option that changes its
    vectors, a known hub commit) computes what mteb's own run of it computes, so it exports under
    its hub id and commit and its rows sit beside the official ones. Anything else is another
    model: ``benchharness/<name>`` at its identity hash, with the reason."""
    info = identity_info
    if info.get("family") != "sentence-transformers":
        why = (
            "post-processed or composed"
            if "base" in info
            else f"family {info.get('family', '?')!r} is not a published sentence-transformers model"
        )
    elif set(info) - _PLAIN_HUB_KEYS:
        why = f"options that change its vectors: {', '.join(sorted(set(info) - _PLAIN_HUB_KEYS))}"
    elif not (isinstance(info.get("model"), str) and HUB_ID.fullmatch(info["model"])):
        why = "a local model, not a hub id"
    elif not _COMMIT.fullmatch(str(info.get("revision", ""))):
        why = "no hub commit recorded"
    else:
        return info["model"], info["revision"], "the hub model as published, at its commit"
    return mteb_name(name), identity, f"not the published model ({why}); revision is the encoder identity"


#: mteb's framework names, by the family an encoder's identity names (the innermost, for a composition)
FRAMEWORKS = {
    "sentence-transformers": ["Sentence Transformers", "PyTorch"],
    "sentence-transformers-object": ["Sentence Transformers", "PyTorch"],
    "hf": ["Transformers", "PyTorch"],
    "transformers-object": ["Transformers", "PyTorch"],
    "openai": ["API"],
}


def frameworks(identity_info: Mapping[str, Any]) -> list[Any]:
    """What computes the vectors, in mteb's words: the base model's library (a post-processor on top
    is NumPy), or NumPy for word vectors and vectors read from files."""
    info = innermost(identity_info)
    found = FRAMEWORKS.get(str(info.get("family")), [])
    return [*found, "NumPy"] if info is not identity_info or not found else found


#: the mteb tasks whose data each named training corpus holds (``benchharness.data.corpora``;
#: sentences alone count: mteb's zero-shot filter asks whether a model saw a task's data at all)
CORPUS_TASKS = {
    "sts-unlabeled": ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"),
    "train-splits": ("STSBenchmark", "SICK-R"),
    "stsb-train": ("STSBenchmark",),
    "stsb-dev": ("STSBenchmark",),
}
#: the mteb task of a run's dev evaluation (its checkpoint was selected on that task's dev split)
DEV_TASKS = {"STSBenchmark-dev": "STSBenchmark", "STSBenchmark": "STSBenchmark"}


def training_datasets(training: Mapping[str, Any]) -> set[str]:
    """The mteb tasks whose data a trained run saw: its named corpora (``+``-joined parts; a
    ``text:`` file or NLI pairs name no mteb task) and the task its checkpoint was selected on."""
    name = str((training.get("data") or {}).get("name", ""))
    seen = {task for part in name.split("+") for task in CORPUS_TASKS.get(part, ())}
    if training.get("dev_task") in DEV_TASKS:
        seen.add(DEV_TASKS[training["dev_task"]])
    return seen


#: mteb's name (``ModelMeta.model_type``) for each kind of model benchharness ships; a kind mteb has
#: no name for is left at mteb's default
MODEL_TYPES: dict[str, Any] = {
    DENSE: "dense",
    SPARSE: "sparse",
    MULTI_VECTOR: "late-interaction",
    CROSS_ENCODER: "cross-encoder",
}


def scoring_function(similarity: str, kind: str) -> ScoringFunction | None:
    """mteb's name for how a model of ``kind`` compares texts: a late-interaction model's MaxSim
    (divided by the query's length or not: the same order), none for a cross-encoder (as mteb's own
    metadata of one), a similarity mteb has no name for as ``custom``."""
    if kind == MULTI_VECTOR:
        return ScoringFunction.MAX_SIM
    if kind == CROSS_ENCODER:
        return None
    return ScoringFunction(similarity) if similarity in set(ScoringFunction) else ScoringFunction.CUSTOM


def registry_meta(hub_id: str) -> ModelMeta | None:
    """mteb's own metadata for a hub model (``mteb.get_model_meta``), or None when its registry,
    shipped with the package, does not list it."""
    import mteb

    try:
        return mteb.get_model_meta(hub_id)
    except KeyError:
        return None


def model_meta(
    name: str,
    identity: str,
    identity_info: Mapping[str, Any],
    similarity: str = "cosine",
    embed_dim: int | None = None,
    export: bool = False,
    training: Mapping[str, Any] | None = None,
    facts: ModelFacts | None = None,
) -> ModelMeta:
    """mteb metadata for a benchharness encoder (also used to export stored results, where only
    the name and identity recorded in the result exist, not the encoder). Evaluation through mteb
    always uses ``benchharness/<name>`` (mteb's cache must never mix our vectors with its own);
    ``export`` names a plain hub model by its hub id (``export_name``); when mteb's own registry
    knows that model, its metadata (parameters, dimensions, license, languages, release date,
    training data...) is kept, at the revision that was run. ``training``, a trained run's manifest,
    gives the model it was adapted from and the mteb tasks whose data it trained on.

    ``facts``, what an export read from the model's own files (``model_facts``: parameters, width,
    token limit, licence, languages, release date), fill the fields, and only the gaps of a
    registry entry; an evaluation through mteb reads no file for them (mteb keys its cache on the
    name and revision alone). ``embed_dim``, when given, is the width the caller knows. The memory
    is mteb's own estimate from the parameter count (``ModelMeta.calculate_memory_usage_mb``).
    The identity's ``kind`` (a model that is not dense records it) gives mteb's model type and the
    name of its similarity (``scoring_function``)."""
    kind = str(identity_info.get("kind", DENSE))
    mteb_model, revision = export_name(name, identity, identity_info)[:2] if export else (mteb_name(name), identity)
    found = facts.known() if facts is not None else {}
    if embed_dim is not None:
        found["embed_dim"] = embed_dim
    if export and mteb_model != mteb_name(name):
        registered = registry_meta(mteb_model)
        if registered is not None:
            gaps = {field: value for field, value in found.items() if getattr(registered, field) is None}
            return with_memory_usage(registered.model_copy(update={"revision": revision, "loader": None, **gaps}))
    meta = ModelMeta(
        loader=None,
        name=mteb_model,
        revision=revision,
        release_date=found.get("release_date"),
        languages=found.get("languages"),
        n_parameters=found.get("n_parameters"),
        memory_usage_mb=None,
        max_tokens=found.get("max_tokens"),
        embed_dim=found.get("embed_dim"),
        license=found.get("license"),
        open_weights=None,
        public_training_code=None,
        public_training_data=None,
        framework=frameworks(identity_info),
        similarity_fn_name=scoring_function(similarity, kind),
        model_type=[MODEL_TYPES.get(kind, "dense")],
        # an instruction model: one whose prompts take a task's instruction (MtebEncoder.role_for)
        use_instructions="instruction_template" in (identity_info.get("prompts") or {}),
        training_datasets=training_datasets(training) if training else None,
        # the hub model an encoder was built from (a trained run's base), unless it is the model itself
        adapted_from=adapted_from(mteb_model, identity_info, training),
    )
    return with_memory_usage(meta)


def with_memory_usage(meta: ModelMeta) -> ModelMeta:
    """``meta`` with mteb's estimate of its memory where it has none: the fp32 size of its
    parameters (``calculate_memory_usage_mb``; none for an API model or an unknown count)."""
    if meta.memory_usage_mb is not None:
        return meta
    return meta.model_copy(update={"memory_usage_mb": meta.calculate_memory_usage_mb()})


def adapted_from(mteb_model: str, identity_info: Mapping[str, Any], training: Mapping[str, Any] | None) -> str | None:
    """The hub model an encoder derives from: a trained run's base, else the hub model a
    composition wraps; None for the hub model itself."""
    base = training.get("base_model") if training else None
    source = base if isinstance(base, str) and HUB_ID.fullmatch(base) else hub_base(identity_info)
    return None if source == mteb_model else source


#: what ``AbsEncoder.get_instruction`` reads of a model: its own table of prompts (a benchharness
#: model has none: its prompts are its roles') and the order of the places an instruction comes from
_NO_PROMPT_TABLE = SimpleNamespace(prompts_dict=None, prompt_priority=AbsEncoder.prompt_priority)


def task_role(prompts: Prompts, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> Role:
    """The role mteb's ``prompt_type`` asks for, with the task's instruction when the model takes
    instructions (its prompts have an ``instruction_template``) and the side is not the documents:
    mteb's ``get_instruction`` (the task's prompt for that side, else its task type's default)."""
    role = role_of(prompt_type)
    if prompts.instruction_template is None or role.name == DOCUMENT.name:
        return role
    instruction = AbsEncoder.get_instruction(_NO_PROMPT_TABLE, task_metadata, prompt_type)  # type: ignore[arg-type]
    return Role(role.name, instruction or None)


def loader_texts(inputs: DataLoader[BatchedInput], task_metadata: TaskMetadata) -> list[str]:
    """The texts of every batch of one of mteb's dataloaders, in order."""
    texts: list[str] = []
    for batch in inputs:
        if "text" not in batch:
            raise InvalidInputError(
                f"mteb task {task_metadata.name}: batch without a 'text' field "
                f"(fields {sorted(batch)}); benchharness encoders take text only"
            )
        texts.extend(batch["text"])
    return texts


class _Sides:
    """What every model handed to mteb does with a task's sides: the role each is encoded or
    scored in (``task_role``), and the text put in front of each side's sentences (``applied``,
    by side: ``query``, ``document``, ``default``; empty for a model without prompts)."""

    def __init__(self, prompts: Prompts) -> None:
        self.prompts = prompts
        self.applied: dict[str, str] = {}

    def role_for(self, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> Role:
        role = task_role(self.prompts, task_metadata, prompt_type)
        if not self.prompts.empty:
            self.applied[str(role)] = self.prompts.for_role(role)
        return role

    def facts(self) -> dict[str, float | int]:
        """What the model reports beside mteb's scores, as ``split/subset/name``; none for vectors."""
        return {}


class MtebEncoder(AbsEncoder, _Sides):
    """mteb's encoder protocol over any benchharness ``Encoder``.

    mteb hands over a DataLoader of ``{"text": [...]}`` batches; the texts of all batches are
    collected and encoded in one call, so that the encoder's own length-sorted batching and,
    with ``cache``, benchharness's embedding cache apply (a sentence seen by any earlier run of
    the same encoder identity is not encoded again).

    Prompts and instructions, as mteb's own wrappers give them (``task_role``):

    - mteb's ``prompt_type`` is the encoder's role (``query``, ``document``, none: the symmetric
      default), so an encoder with role prompts gets them as mteb's sentence-transformers wrapper
      gives a model its ``query``/``document`` prompts;
    - an encoder with an ``instruction_template`` is an instruction model: the task's instruction
      (mteb's ``get_instruction``: the task's prompt for that side, else its task type's default)
      fills the template on the query side and on every sentence of a symmetric task, and the
      documents get their own prompt, as mteb's instruction wrapper does with
      ``apply_instruction_to_passages=False`` (e5-mistral, gte-Qwen, Qwen3-Embedding);
    - an encoder without prompts gets none.
    """

    mteb_model_meta: ModelMeta  # always set here (AbsEncoder allows None; mteb's EncoderProtocol does not)

    def __init__(self, encoder: Encoder, cache: EmbeddingCache | None = None) -> None:
        self.model = encoder if cache is None else CachingEncoder(encoder, cache)
        _Sides.__init__(self, self.model.prompts)
        self.mteb_model_meta = model_meta(encoder.name, encoder.identity, encoder.identity_record(), encoder.similarity)

    def encode(
        self,
        inputs: DataLoader[BatchedInput],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        texts = loader_texts(inputs, task_metadata)
        role = self.role_for(task_metadata, prompt_type)
        return np.asarray(self.model.encode_role(texts, role), dtype=np.float32)


def role_of(prompt_type: PromptType | str | None) -> Role:
    """mteb's ``prompt_type`` as a benchharness role."""
    value = getattr(prompt_type, "value", prompt_type)
    return {"query": QUERY, "document": DOCUMENT}.get(value, DEFAULT) if value is not None else DEFAULT


class MtebKindModel(_Sides):
    """A model of a kind other than dense, scored through its kind's views: one view for each split
    and subset mteb evaluates, so that what each reports (``facts``: active dimensions, bytes per
    document, pairs scored) is its own. Each view reads and keeps the model's outputs in the kind's
    cache (``settings.cache_dir``), under the model's identity."""

    def __init__(self, encoder: Encoder, settings: ViewSettings) -> None:
        self.model = encoder
        super().__init__(self.model.prompts)
        self.kind = kind_of(self.model)
        self.settings = settings
        self.mteb_model_meta = model_meta(
            self.model.name, self.model.identity, self.model.identity_record(), self.model.similarity
        )
        self._views: dict[tuple[str, str], View] = {}

    def view(self, hf_split: str, hf_subset: str) -> View:
        if (hf_split, hf_subset) not in self._views:
            assert self.kind.open_view is not None  # a kind with no view is dense: MtebEncoder
            self._views[hf_split, hf_subset] = self.kind.open_view(self.model, self.settings)
        return self._views[hf_split, hf_subset]

    def sides(self, task_metadata: TaskMetadata) -> tuple[Role, Role]:
        """The roles of a (query, document) pair of a retrieval task."""
        return self.role_for(task_metadata, PromptType.query), self.role_for(task_metadata, PromptType.document)

    def facts(self) -> dict[str, float | int]:
        return {
            f"{split}/{subset}/{name}": value
            for (split, subset), view in self._views.items()
            for name, value in view.facts().items()
        }


class MtebPairModel(MtebKindModel):
    """mteb's ``CrossEncoderProtocol`` over a model that scores pairs (a cross-encoder): mteb pairs
    each query of a reranking task with its candidates (``SearchCrossEncoderWrapper``), and the pairs
    are scored by the kind's view, the query in the query role and the candidate in the document's."""

    def predict(
        self,
        inputs1: DataLoader[BatchedInput],
        inputs2: DataLoader[BatchedInput],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        left, right = loader_texts(inputs1, task_metadata), loader_texts(inputs2, task_metadata)
        return self.view(hf_split, hf_subset).pairs(left, right, self.sides(task_metadata))


class MtebSearchModel(MtebKindModel):
    """mteb's ``SearchProtocol`` over a model whose kind searches a corpus (sparse, multi-vector):
    without candidates, each query's ``top_k`` best documents of the whole corpus by the view's exact
    search (a corpus block at a time); with a reranking task's candidates (``top_ranked``), each
    query's candidates scored as (query, document) pairs and its ``top_k`` best kept, as mteb's
    search wrappers rerank. A query without candidates gets none, as there."""

    def __init__(self, encoder: Encoder, settings: ViewSettings) -> None:
        super().__init__(encoder, settings)
        self._corpus: CorpusDatasetType | None = None

    def index(
        self,
        corpus: CorpusDatasetType,
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        encode_kwargs: Mapping[str, Any],
        num_proc: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Keep the corpus: its documents are encoded during ``search``, a block at a time."""
        self._corpus = corpus

    def search(
        self,
        queries: QueryDatasetType,
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        top_k: int,
        encode_kwargs: Mapping[str, Any],
        top_ranked: TopRankedDocumentsType | None = None,
        num_proc: int | None = None,
        **kwargs: Any,
    ) -> RetrievalOutputType:
        if self._corpus is None:
            raise ValueError("mteb searched before indexing a corpus")
        corpus, self._corpus = self._corpus, None
        ids = list(corpus["id"])
        documents = self._texts(corpus, task_metadata, PromptType.document, num_proc)
        query_ids = list(queries["id"])
        texts = self._texts(queries, task_metadata, PromptType.query, num_proc)
        view, roles = self.view(hf_split, hf_subset), self.sides(task_metadata)
        if top_ranked is None:
            context = SearchContext(query_ids, ids)  # a run file's lists are found by the ids
            scores, found = view.search(texts, documents, min(top_k, len(documents)), roles, context=context)
            return {
                qid: {ids[j]: float(score) for score, j in zip(row, hits) if j >= 0}
                for qid, row, hits in zip(query_ids, scores, found)
            }
        return _reranked(view, roles, query_ids, texts, ids, documents, top_ranked, top_k)

    @staticmethod
    def _texts(
        dataset: CorpusDatasetType, task_metadata: TaskMetadata, prompt_type: PromptType, num_proc: int | None
    ) -> list[str]:
        """The texts mteb's dataloader gives a model for one side (a document's title and text, a
        query and its instruction)."""
        if len(dataset) == 0:
            return []
        loader = create_dataloader(dataset, task_metadata=task_metadata, prompt_type=prompt_type, num_proc=num_proc)
        return loader_texts(loader, task_metadata)


def _reranked(
    view: View,
    roles: tuple[Role, Role],
    query_ids: Sequence[str],
    queries: Sequence[str],
    ids: Sequence[str],
    documents: Sequence[str],
    top_ranked: TopRankedDocumentsType,
    top_k: int,
) -> RetrievalOutputType:
    """Each query's candidates scored as pairs in one call of the view (a query's pairs next to each
    other), and its ``top_k`` best kept."""
    position = {doc: i for i, doc in enumerate(ids)}
    asked = [(qid, query, list(top_ranked[qid])) for qid, query in zip(query_ids, queries) if top_ranked.get(qid)]
    left = [query for _, query, candidates in asked for _ in candidates]
    right = [documents[position[doc]] for _, _, candidates in asked for doc in candidates]
    scores = view.pairs(left, right, roles) if left else np.zeros(0)
    results: RetrievalOutputType = {qid: {} for qid in query_ids}
    start = 0
    for qid, _, candidates in asked:
        mine = scores[start : start + len(candidates)]
        start += len(candidates)
        best = np.argsort(-mine, kind="stable")[:top_k]
        results[qid] = {candidates[i]: float(mine[i]) for i in best}
    return results


def mteb_model(
    encoder: Encoder, cache: EmbeddingCache | None = None, settings: ViewSettings | None = None
) -> MtebEncoder | MtebPairModel | MtebSearchModel:
    """``encoder`` in the protocol mteb 2 evaluates a model of its kind with (see the module's
    docstring). A dense encoder's vectors go through ``cache``; a model of another kind keeps its
    outputs in its kind's cache under ``settings.cache_dir`` (else ``cache``'s folder, else nowhere)
    and searches a corpus a block within ``settings.memory_mib`` at a time."""
    kind = kind_of(encoder)
    if kind.open_view is None:
        return MtebEncoder(encoder, cache)
    settings = settings or ViewSettings(cache.root if cache is not None else None)
    if SEARCH in kind.offers:
        return MtebSearchModel(encoder, settings)
    if PAIRS in kind.offers:
        return MtebPairModel(encoder, settings)
    raise KindMismatchError(
        f"{encoder.name} is {kind.title} ({kind.gives}); mteb evaluates a model that is not dense by pair "
        "scores or a search of a corpus, and it offers neither"
    )
