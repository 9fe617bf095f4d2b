"""Any sentence-transformers model, run exactly as its own modules define it (the ``st`` family:
``st:<hub id or folder>``; sentence-transformers is imported when the model is first used)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import CROSS_ENCODER, DENSE, MULTI_VECTOR, SPARSE
from benchharness.core.plugins import load_object
from benchharness.core.progress import shown
from benchharness.core.prompts import Prompts, check_prompt
from benchharness.core.settings import HubSettings
from benchharness.core.specs import BuildContext, Family, Params
from benchharness.encoders import hub as hub_files
from benchharness.encoders.backends import REFERENCE, changes_outputs
from benchharness.encoders.checkpoint import load_complete, quiet_loading
from benchharness.encoders.model_type import declared_kind
from benchharness.encoders.st_folder import module_weights
from benchharness.encoders.tokenizer_files import declared_token, sentence_transformer_tokenizer_folder
from benchharness.encoders.transformer import TransformerEncoder

#: the prompt names sentence-transformers models use for the document side (mteb: "document",
#: ST's retrieval evaluator: "corpus", e5-style configs: "passage"), in order of preference
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")


def configured_prompts(folder: Path, name: str) -> Prompts:
    """The prompts a model folder's ``config_sentence_transformers.json`` configures: ``query`` and
    the first of ``DOCUMENT_PROMPT_NAMES`` by role, and ``default_prompt_name``'s prompt for every
    role without its own, which is what ``SentenceTransformer.encode`` applies when no prompt is
    named. A model that pools without its prompt's tokens (``include_prompt: false``) is refused
    with a prompt: its vectors would differ from sentence-transformers'."""
    config = folder / "config_sentence_transformers.json"
    try:
        settings = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{name}: cannot read {config}: {exc}") from None
    return prompts_by_role(
        settings.get("prompts") or {},
        settings.get("default_prompt_name"),
        _pools_without_prompt(folder),
        f"{name}: {config}",
    )


def prompts_by_role(prompts: Any, default_name: str | None, pools_without_prompt: bool, where: str) -> Prompts:
    """sentence-transformers' named prompts (``SentenceTransformer.prompts``) as prompts by role."""
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise InvalidInputError(f"{where}: 'prompts' must map names to strings")
    if default_name is not None and default_name not in prompts:
        raise InvalidInputError(
            f"{where}: default_prompt_name {default_name!r} is not one of its prompts ({', '.join(prompts) or 'none'})"
        )
    document = next((k for k in DOCUMENT_PROMPT_NAMES if k in prompts), None)
    # the prompts applied are checked as a spec's are; a model's other named prompts never reach its tokenizer
    for used in dict.fromkeys(n for n in (default_name, "query", document) if n in prompts):
        check_prompt(where, f"prompt {used!r}", prompts[used])
    found = Prompts(
        default=prompts.get(default_name) if default_name else None,
        query=prompts.get("query"),
        document=prompts[document] if document else None,
    )
    if not found.empty and pools_without_prompt:
        raise InvalidInputError(
            f"{where}: its Pooling leaves the prompt's tokens out (include_prompt: false), which "
            "benchharness does not reproduce; evaluate it with the mteb bridge instead"
        )
    return found


def _pools_without_prompt(folder: Path) -> bool:
    for pooling in folder.glob("*Pooling/config.json"):
        try:
            if json.loads(pooling.read_text(encoding="utf-8")).get("include_prompt") is False:
                return True
        except (OSError, ValueError):
            continue
    return False


class SentenceTransformerEncoder(TransformerEncoder):
    """The model's own modules, run by ``benchharness.encoders.inference`` (``backend=eager``, the default, or
    ``compile``/``onnx``: batches of equal token length, ``batch_size`` x 64 tokens each) where the
    model's shape allows (see ``benchharness.encoders.sbert_forward``), else by ``SentenceTransformer.encode``,
    which ``backend=reference`` asks for (the path the stored scores were first computed with).

    The identity covers the weights and every module's configuration (pooling mode, normalisation,
    max sequence length), since those, not the class, decide the vectors.
    """

    def __init__(
        self,
        name: str,
        model: str,
        batch_size: int = 64,
        device: str | None = None,
        precision: str = "fp32",
        backend: str | None = None,
        hub: HubSettings | None = None,
    ) -> None:
        super().__init__(name, batch_size, device, precision, backend)
        self.source = hub_files.resolve(model, hub)
        self._model = None
        self.prompts = configured_prompts(self.source.path, name)

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            transformer = sentence_transformer_tokenizer_folder(self.source.path)
            if transformer is not None and (transformer / "config.json").is_file():
                # sentence-transformers reports no missing weights: its Transformer module's folder
                # goes through the one checked loader first (a second, brief load of the weights)
                load_complete(transformer, self.name)
            with quiet_loading():  # ST's pooling never reads the BERT pooler that MiniLM-L3 lacks
                # a folder hub.resolve found: its modules are read from it, never looked up on the hub
                self._model = SentenceTransformer(str(self.source.path), device=str(self.device), local_files_only=True)
        return self._model

    def _declared_mask_token(self) -> str | None:
        folder = sentence_transformer_tokenizer_folder(self.source.path)
        return declared_token(folder) if folder is not None else None

    def _tokenizer_if_loaded(self) -> Any | None:
        return self._model.tokenizer if self._model is not None else None

    def _load_tokenizer(self) -> Any:
        return self.model.tokenizer

    def _token_limit(self) -> int | None:
        limit = getattr(self.model[0], "max_seq_length", None)
        return int(limit) if limit else None

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        from benchharness.encoders.sbert_forward import ModuleHead, engine_unsupported

        if not sentences:
            return np.zeros((0, self.model.get_embedding_dimension()), dtype=np.float32)
        reason = "the reference path was asked for" if self.backend == REFERENCE else engine_unsupported(self.model)
        if reason is None:
            first = self.model[0]
            return self.engine(first.model, first.tokenizer, first.max_seq_length).encode(
                list(sentences), ModuleHead(self.model), desc=f"encode {self.name}"
            )
        if self.precision != "fp32" or self.backend not in (REFERENCE, "eager"):
            raise InvalidInputError(
                f"{self.name}: precision={self.precision} and backend={self.backend} need the "
                f"inference engine, which does not run this model ({reason})"
            )
        if self.backend != REFERENCE:
            self._engine_refusal = reason
        vecs = self.model.encode(
            list(sentences),
            batch_size=self.batch_size,
            show_progress_bar=shown(),
            convert_to_numpy=True,
        )
        return np.asarray(vecs, dtype=np.float32)

    def _module_configs(self) -> dict[str, Any]:
        """The JSON configs that define the pipeline, read from the model folder."""
        folder = self.source.path
        configs: dict[str, Any] = {}
        modules_file = folder / "modules.json"
        if modules_file.exists():
            modules = json.loads(modules_file.read_text())
            configs["modules"] = [m.get("type") for m in modules]
            for m in modules:
                for cfg_name in ("config.json", "sentence_bert_config.json"):
                    cfg = folder / m.get("path", "") / cfg_name
                    if m.get("path") and cfg.exists():
                        configs[f"{m['path']}/{cfg_name}"] = json.loads(cfg.read_text())
        sbert_cfg = folder / "sentence_bert_config.json"
        if sbert_cfg.exists():
            configs["sentence_bert_config.json"] = json.loads(sbert_cfg.read_text())
        return configs

    def identity_info(self) -> dict[str, Any]:
        info = {
            "family": "sentence-transformers",
            "model": self.source.name,
            "revision": self.source.revision,
            "weights_sha256": self.source.weights_sha256,
            "modules": self._module_configs(),
        }
        # a module's own weights (a projection's Dense after the pooling) decide the vectors as much as
        # the transformer's; recorded where there are any, so models without them keep their identity
        held = module_weights(self.source.path)
        if held:
            info["module_weights"] = held
        # only when they move vectors, so that fp32 eager keeps the reference path's identity
        if self.precision != "fp32":
            info["precision"] = self.precision
        if changes_outputs(self.backend):
            info["backend"] = self.backend
        return info

    @property
    def metadata(self) -> dict[str, Any]:
        cfg = self._module_configs()
        pooling = next((v for k, v in cfg.items() if k.endswith("Pooling/config.json")), None)
        return {
            **super().metadata,
            "base_model": self.source.name,
            "pooling": pooling,
            "modules": cfg.get("modules"),
            **self._run_metadata(),
        }


#: the builder of each kind of model other than dense, ``module:function`` (imported when a folder of
#: that kind is met); each takes (name, spec, context, source) as ``build`` does, and the resolved source
KIND_BUILDERS = {
    SPARSE: "benchharness.encoders.st_sparse:build",
    MULTI_VECTOR: "benchharness.encoders.st_multi_vector:build",
    CROSS_ENCODER: "benchharness.encoders.st_cross_encoder:build",
}


def build(name: str, spec: Params, context: BuildContext) -> Encoder:
    """The model the folder holds, as the kind its files declare (``encoders.model_type``): a dense
    ``SentenceTransformerEncoder``, or a sparse, multi-vector or cross-encoder model, never one
    converted into another."""
    source = hub_files.resolve(spec["model"], context.hub)
    kind = declared_kind(source.path, name)
    if kind != DENSE:
        builder: Callable[..., Encoder] = load_object(KIND_BUILDERS[kind])
        return builder(name, spec, context, source)
    return SentenceTransformerEncoder(name, **{**context.sizes(), **spec}, hub=context.hub)


FAMILY = Family.of("st", build, accepts=SentenceTransformerEncoder, takes_prompts=True, from_manifest=True)
