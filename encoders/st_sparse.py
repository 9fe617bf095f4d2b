"""A sentence-transformers ``SparseEncoder`` (SPLADE and its kin), as a sparse model: ``st:<folder or
hub id>`` on a folder whose ``config_sentence_transformers.json`` says ``model_type: SparseEncoder``
(``encoders.sbert.build`` hands it here), or a ``SparseEncoder`` object given to
``benchharness.evaluate`` (``from_object``).

Every text is encoded by the model's own methods, as sentence-transformers' sparse evaluators encode
it: ``encode_query`` for the query role, ``encode_document`` for the document role, ``encode`` for a
symmetric task, each with the role's prompt (the model's configured one, a spec's, or the task's
instruction through the template) and the model's own ``max_active_dims``. ST's sparse tensors become
``scipy.sparse.csr_matrix`` rows of float32, never a dense matrix.

The identity pins what decides the vectors and their scores: the weights, every module's
configuration, the tokenizer's maximum length, the prompts, ``max_active_dims`` and the similarity.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kind_models import SparseModel
from benchharness.core.progress import shown
from benchharness.core.prompts import DEFAULT, Role
from benchharness.core.specs import BuildContext, Params
from benchharness.encoders.checkpoint import refuse_missing_tokenizer
from benchharness.encoders.hub import ModelSource
from benchharness.encoders.in_memory import HeldSource, evaluating
from benchharness.encoders.sbert import configured_prompts, prompts_by_role
from benchharness.encoders.st_folder import (
    LibraryModel,
    folder_identity,
    library_sizes,
    object_identity,
    read_config,
    role_method,
    transformer_folder,
)
from benchharness.scoring.sparse import SIMILARITIES

#: sentence-transformers' own default batch size, and its sparse evaluators'
BATCH_SIZE = 32


class SparseSentenceTransformer(LibraryModel, SparseModel):
    """A ``SparseEncoder``; its subclasses say where it comes from (``model``) and what pins it."""

    role_aware = True

    def __init__(self, name: str, batch_size: int = BATCH_SIZE, device: str | None = None) -> None:
        super().__init__(name, batch_size, device)
        self._width: int | None = None

    @property
    @abstractmethod
    def model(self) -> Any:
        """The ``SparseEncoder``."""

    @abstractmethod
    def _max_active_dims(self) -> int | None:
        """The most active terms the model keeps of a vector (None: all), as it applies it in ``encode``."""

    def encode_sparse(self, sentences: Sequence[str], role: Role = DEFAULT) -> Any:
        model = self.model
        with evaluating(model):
            embeddings = role_method(model, role)(
                list(sentences),
                prompt=self.prompts.for_role(role) or None,
                batch_size=self.batch_size,
                show_progress_bar=shown(),
                convert_to_tensor=True,
                convert_to_sparse_tensor=True,
                save_to_cpu=True,
            )
        return self._csr(embeddings, len(sentences))

    def _csr(self, embeddings: Any, n: int) -> Any:
        """ST's sparse COO tensor as CSR float32 rows, its stored zeros dropped (an active term is a
        non-zero one, as ``SparseEncoder.sparsity`` counts it)."""
        import scipy.sparse as sp

        if embeddings.ndim != 2:  # no text: ST returns an empty tensor of no width
            return sp.csr_matrix((n, self.vocabulary_size), dtype=np.float32)
        self._width = int(embeddings.shape[1])
        coo = embeddings.coalesce()
        rows, columns = coo.indices().numpy()
        values = coo.values().numpy().astype(np.float32)  # on the CPU: save_to_cpu
        matrix = sp.csr_matrix((values, (rows, columns)), shape=tuple(coo.shape), dtype=np.float32)
        matrix.eliminate_zeros()
        return matrix

    @property
    def vocabulary_size(self) -> int:
        """The width of the model's vectors, as its output has it (SPLADE's pooling learns it from
        the MLM head's logits at the first forward pass, so no module's configuration need say)."""
        if self._width is None:
            self.encode_sparse([""])  # sets it
        assert self._width is not None
        return self._width

    def _sparse_settings(self) -> dict[str, Any]:
        """What decides the scores beside the modules: the similarity and ``max_active_dims``."""
        return {"similarity_fn": self.similarity, "max_active_dims": self._max_active_dims()}

    @property
    def metadata(self) -> dict[str, Any]:
        return {**super().metadata, **self._sparse_settings(), "batch_size": self.batch_size}


class SparseEncoderFolder(SparseSentenceTransformer):
    """A ``SparseEncoder`` saved in a folder (or a hub snapshot), read with ``local_files_only``."""

    def __init__(self, name: str, source: ModelSource, batch_size: int = BATCH_SIZE, device: str | None = None) -> None:
        super().__init__(name, batch_size, device)
        self.source = source
        self.prompts = configured_prompts(source.path, name)
        self._settings = read_config(source.path / "config_sentence_transformers.json", name)
        self.similarity = _similarity(self._settings.get("similarity_fn_name"), name)
        refuse_missing_tokenizer(transformer_folder(source.path), name)

    @property
    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import SparseEncoder

            self._model = self._load(SparseEncoder, self.source.path)
        return self._model

    def _max_active_dims(self) -> int | None:
        value = self._settings.get("max_active_dims")
        return None if value is None else int(value)

    def identity_info(self) -> dict[str, Any]:
        return {**folder_identity(self.source, self.name), **self._sparse_settings()}


class SparseEncoderObject(SparseSentenceTransformer):
    """A ``SparseEncoder`` in memory: its weights as they are now are its identity, and it encodes in
    eval mode and is handed back in the mode it was in (a model being trained is evaluated in place)."""

    def __init__(self, name: str, model: Any, batch_size: int = BATCH_SIZE, device: str | None = None) -> None:
        super().__init__(name, batch_size, device or str(model.device))
        self._model = model if device is None else model.to(device)
        self.source = HeldSource.of(model, name, described_by=getattr(model[0], "auto_model", model))
        self.prompts = prompts_by_role(
            dict(getattr(model, "prompts", None) or {}), getattr(model, "default_prompt_name", None), False, name
        )
        self.similarity = _similarity(model.similarity_fn_name, name)

    @property
    def model(self) -> Any:
        return self._model

    def _max_active_dims(self) -> int | None:
        value = self._model.max_active_dims
        return None if value is None else int(value)

    def identity_info(self) -> dict[str, Any]:
        return object_identity(self._model, self.source, **self._sparse_settings())


def build(name: str, spec: Params, context: BuildContext, source: ModelSource) -> SparseEncoderFolder:
    """``st:<folder>`` of a ``SparseEncoder`` (``encoders.sbert.build``, which resolved ``source``)."""
    return SparseEncoderFolder(name, source, **library_sizes(name, "a sparse encoder", spec, context))


def from_object(
    model: Any, name: str, identity: str | None = None, batch_size: int | None = None, device: str | None = None
) -> SparseEncoderObject:
    """A ``SparseEncoder`` object given to ``evaluate``."""
    if identity is not None:
        raise InvalidInputError(
            "identity= pins a plain callable; a SparseEncoder has an identity of its own "
            "(the fingerprint of its weights)"
        )
    return SparseEncoderObject(name, model, batch_size or BATCH_SIZE, device)


def _similarity(value: Any, name: str) -> str:
    """The model's similarity (``similarity_fn_name``; dot product when it names none, as
    ``SparseEncoder`` defaults), refused in one line when the sparse view does not compute it."""
    similarity = "dot" if value is None else str(value)
    if similarity not in SIMILARITIES:
        raise InvalidInputError(
            f"{name}: its similarity_fn_name is {similarity!r}; benchharness scores sparse vectors by "
            f"{' or '.join(SIMILARITIES)} (set similarity_fn_name to one of them to evaluate it)"
        )
    return similarity
