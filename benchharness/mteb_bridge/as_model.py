"""A benchharness encoder as an mteb model.

mteb keys its result cache on the model's name and revision, and silently serves a cached result
to any model with the same pair. So the name comes from the benchharness encoder name (a built-in,
a composition, a trained run or an ad-hoc spec) and the revision is the encoder identity, the
hash of everything that determines the vectors: two encoders that could give different vectors
never share a (name, revision), and a retrained or re-fitted model gets a new revision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.models import ModelMeta
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ScoringFunction

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Role
from benchharness.core.results import slug
from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
from benchharness.mteb_bridge.model_facts import HUB_ID, ModelFacts, innermost

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import BatchedInput, PromptType
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
    is mteb's own estimate from the parameter count (``ModelMeta.calculate_memory_usage_mb``)."""
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
        similarity_fn_name=ScoringFunction(similarity),
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


class MtebEncoder(AbsEncoder):
    """mteb's encoder protocol over any benchharness ``Encoder``.

    mteb hands over a DataLoader of ``{"text": [...]}`` batches; the texts of all batches are
    collected and encoded in one call, so that the encoder's own length-sorted batching and,
    with ``cache``, benchharness's embedding cache apply (a sentence seen by any earlier run of
    the same encoder identity is not encoded again).

    Prompts and instructions, as mteb's own wrappers give them (:meth:`role_for`):

    - mteb's ``prompt_type`` is the encoder's role (``query``, ``document``, none: the symmetric
      default), so an encoder with role prompts gets them as mteb's sentence-transformers wrapper
      gives a model its ``query``/``document`` prompts;
    - an encoder with an ``instruction_template`` is an instruction model: the task's instruction
      (mteb's ``get_instruction``: the task's prompt for that side, else its task type's default)
      fills the template on the query side and on every sentence of a symmetric task, and the
      documents get their own prompt, as mteb's instruction wrapper does with
      ``apply_instruction_to_passages=False`` (e5-mistral, gte-Qwen, Qwen3-Embedding);
    - an encoder without prompts gets none.

    ``applied`` records the text put in front of each side's sentences.
    """

    mteb_model_meta: ModelMeta  # always set here (AbsEncoder allows None; mteb's EncoderProtocol does not)

    def __init__(self, encoder: Encoder, cache: EmbeddingCache | None = None) -> None:
        self.model = encoder if cache is None else CachingEncoder(encoder, cache)
        self.mteb_model_meta = model_meta(encoder.name, encoder.identity, encoder.identity_record(), encoder.similarity)
        #: the text put in front of each side's sentences so far (side: ``query``, ``document``, ``default``)
        self.applied: dict[str, str] = {}

    def role_for(self, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> Role:
        """The role mteb's ``prompt_type`` asks for, with the task's instruction when the encoder
        takes instructions (it has an ``instruction_template``) and the side is not the documents."""
        role = role_of(prompt_type)
        if self.model.prompts.instruction_template is None or role.name == "document":
            return role
        return Role(role.name, self.get_instruction(task_metadata, prompt_type) or None)

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
        texts: list[str] = []
        for batch in inputs:
            if "text" not in batch:
                raise InvalidInputError(
                    f"mteb task {task_metadata.name}: batch without a 'text' field "
                    f"(fields {sorted(batch)}); benchharness encoders take text only"
                )
            texts.extend(batch["text"])
        role = self.role_for(task_metadata, prompt_type)
        if not self.model.prompts.empty:
            self.applied[str(role)] = self.model.prompts.for_role(role)
        return np.asarray(self.model.encode_role(texts, role), dtype=np.float32)


def role_of(prompt_type: PromptType | str | None) -> Role:
    """mteb's ``prompt_type`` as a benchharness role."""
    value = getattr(prompt_type, "value", prompt_type)
    return {"query": QUERY, "document": DOCUMENT}.get(value, DEFAULT) if value is not None else DEFAULT
