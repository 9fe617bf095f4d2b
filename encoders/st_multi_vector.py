"""sentence-transformers' ``MultiVectorEncoder`` (late interaction, ColBERT), as a multi-vector model:
``st:<folder or hub id>`` on a folder whose configuration says it is one (``model_type:
MultiVectorEncoder``, PyLate's ``ColBERT``, a Stanford ``HF_ColBERT`` checkpoint; ``encoders.sbert``
hands it here), or a ``MultiVectorEncoder`` object given to ``benchharness.evaluate`` (``from_object``).

Every text is encoded by the model's own methods, as ``MultiVectorInformationRetrievalEvaluator``
encodes it: ``encode_query`` for the query role (the query prompt, ``query_length``, query expansion
to a fixed number of tokens), ``encode_document`` for the document role (the document prompt,
``document_length``, the skiplist's tokens dropped), ``encode`` for a symmetric task, each with the
role's prompt (the model's own, a spec's, or a task's instruction through the template). What comes
back is one float32 matrix per text, a row per token the model scores.

The identity pins what decides the token vectors and their scores: the weights (the transformer's
and every module's own, such as the projection's), every configuration file of the modules (query
and document lengths, query expansion, the skiplist), the tokenizer's maximum length, the prompts
and the similarity (``maxsim``, or ``meanmaxsim``: MaxSim divided by the query's token count).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kind_models import MultiVectorModel
from benchharness.core.progress import shown
from benchharness.core.prompts import DEFAULT, Role
from benchharness.core.specs import BuildContext, Params
from benchharness.encoders.checkpoint import refuse_missing_tokenizer
from benchharness.encoders.hub import ModelSource
from benchharness.encoders.in_memory import HeldSource, evaluating
from benchharness.encoders.sbert import prompts_by_role
from benchharness.encoders.st_folder import (
    LibraryModel,
    folder_identity,
    library_sizes,
    object_identity,
    read_config,
    role_method,
    transformer_folder,
    unused_poolers,
)

#: sentence-transformers' own default batch size, and its multi-vector evaluators'
BATCH_SIZE = 32
#: the similarities of ``MultiVectorEncoder`` (``similarity_fn_name``), and the one it defaults to
SIMILARITIES = ("maxsim", "meanmaxsim")
MAXSIM = "maxsim"


class MultiVectorSentenceTransformer(LibraryModel, MultiVectorModel):
    """A ``MultiVectorEncoder``; its subclasses say where it comes from (``model``) and what pins it."""

    role_aware = True

    @property
    @abstractmethod
    def model(self) -> Any:
        """The ``MultiVectorEncoder``."""

    def _set_similarity(self, value: Any) -> None:
        """The model's similarity, refused in one line when MaxSim's view does not compute it."""
        similarity = MAXSIM if value is None else str(value)
        if similarity not in SIMILARITIES:
            raise InvalidInputError(
                f"{self.name}: its similarity_fn_name is {similarity!r}; a multi-vector encoder scores by "
                f"{' or '.join(SIMILARITIES)}"
            )
        self.similarity = similarity

    def encode_tokens(self, sentences: Sequence[str], role: Role = DEFAULT) -> list[np.ndarray]:
        """Each text's token vectors for ``role``, by ``encode_query``, ``encode_document`` or
        ``encode`` with the role's prompt, in eval mode (batches sorted by length: ST's own)."""
        if not sentences:
            return []
        model = self.model
        with evaluating(model):
            matrices = role_method(model, role)(
                list(sentences),
                prompt=self.prompts.for_role(role),  # "" applies none, as a prompt set to nothing
                batch_size=self.batch_size,
                show_progress_bar=shown(),
                convert_to_numpy=True,
            )
        return [np.asarray(m, dtype=np.float32) for m in matrices]

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            **super().metadata,
            "similarity_fn_name": self.similarity,
            "batch_size": self.batch_size,
            "device": self._device.chosen,
        }


class MultiVectorEncoderFolder(MultiVectorSentenceTransformer):
    """A ``MultiVectorEncoder`` saved in a folder (or a hub snapshot), read with ``local_files_only``
    when it first encodes: a rerun whose outputs are all cached loads nothing, except a folder of an
    older format (PyLate's, Stanford's), whose prompts are what sentence-transformers composes when it
    loads it (a ``query_prefix``, a ``[Q]`` marker), so it is loaded to read them."""

    def __init__(self, name: str, source: ModelSource, batch_size: int = BATCH_SIZE, device: str | None = None) -> None:
        super().__init__(name, batch_size, device)
        self.source = source
        refuse_missing_tokenizer(transformer_folder(source.path), name)
        settings = read_config(source.path / "config_sentence_transformers.json", name)
        self._set_similarity(settings.get("similarity_fn_name"))
        if settings.get("model_type") == "MultiVectorEncoder":
            where = f"{name}: {source.path}"
            named = _named_prompts(settings.get("prompts"))
            self.prompts = prompts_by_role(named, settings.get("default_prompt_name"), False, where)
        else:
            self.prompts = _prompts_of(self.model, name)

    @property
    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import MultiVectorEncoder

            self._model = self._load(MultiVectorEncoder, self.source.path)
        return self._model

    def identity_info(self) -> dict[str, Any]:
        identity = folder_identity(self.source, self.name)
        identity["modules"].update(_stanford_metadata(self.source.path, self.name))
        return {**identity, "similarity_fn_name": self.similarity}


class MultiVectorEncoderObject(MultiVectorSentenceTransformer):
    """A ``MultiVectorEncoder`` in memory: its weights as they are now are its identity, and it encodes
    in eval mode and is handed back in the mode it was in (a model being trained is evaluated in place)."""

    def __init__(self, name: str, model: Any, batch_size: int = BATCH_SIZE, device: str | None = None) -> None:
        super().__init__(name, batch_size, device or str(model.device))
        self._model = model if device is None else model.to(device)
        self.source = HeldSource.of(
            model, name, described_by=getattr(model[0], "auto_model", model), unused=unused_poolers(model)
        )
        self.prompts = _prompts_of(model, name)
        self._set_similarity(model.similarity_fn_name)

    @property
    def model(self) -> Any:
        return self._model

    def identity_info(self) -> dict[str, Any]:
        return object_identity(self._model, self.source, similarity_fn_name=self.similarity)


def _named_prompts(prompts: Any) -> Any:
    """A model's named prompts without those set to None (``MultiVectorEncoder``'s defaults, which
    it applies as no prompt)."""
    return {k: v for k, v in prompts.items() if v is not None} if isinstance(prompts, dict) else prompts


def _prompts_of(model: Any, name: str) -> Any:
    """The prompts a loaded ``MultiVectorEncoder`` applies by role."""
    return prompts_by_role(_named_prompts(dict(model.prompts or {})), model.default_prompt_name, False, name)


def _stanford_metadata(folder: Path, name: str) -> dict[str, Any]:
    """A Stanford ColBERT checkpoint's ``artifact.metadata`` (its query and document lengths, the
    punctuation it masks, its markers), which sentence-transformers reads when it loads one."""
    metadata = read_config(folder / "artifact.metadata", name)
    return {"artifact.metadata": metadata} if metadata else {}


def build(name: str, spec: Params, context: BuildContext, source: ModelSource) -> MultiVectorEncoderFolder:
    """``st:<folder>`` of a ``MultiVectorEncoder`` (``encoders.sbert.build``, which resolved ``source``)."""
    return MultiVectorEncoderFolder(name, source, **library_sizes(name, "a multi-vector encoder", spec, context))


def from_object(
    model: Any, name: str, batch_size: int | None = None, device: str | None = None
) -> MultiVectorEncoderObject:
    """A ``MultiVectorEncoder`` object given to ``benchharness.evaluate``."""
    return MultiVectorEncoderObject(name, model, batch_size or BATCH_SIZE, device)
