"""What the sentence-transformers models of every kind other than dense (``SparseEncoder``,
``MultiVectorEncoder``, ``CrossEncoder``) share, read from a folder or from an object in memory:
the configuration files and weights that pin an identity, the transformer's folder and token limit,
and the settings only the dense inference engine takes (refused for the others in one line).

Each of them is encoded by the library's own methods (``encode_query``, ``predict``...), so what
decides its outputs is exactly what its files say: each module's configuration, the transformer's
weights and each module's own (a projection's ``Dense``), the token limit, the prompts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchharness.core.devices import DeviceChoice, checked_batch_size
from benchharness.core.errors import InvalidInputError
from benchharness.core.kind_models import KindModel
from benchharness.core.prompts import Role
from benchharness.core.specs import BuildContext, Params
from benchharness.encoders.backends import DEFAULT_BACKEND, REFERENCE
from benchharness.encoders.checkpoint import quiet_loading
from benchharness.encoders.hub import WEIGHT_FILES, ModelSource, weights_fingerprint
from benchharness.encoders.tokenizer_files import sentence_transformer_tokenizer_folder

#: keys of a configuration file that say which library versions wrote it, not how the model works
VERSION_KEYS = ("__version__", "transformers_version", "_name_or_path")
#: the backends of ``st:`` that run a model of another kind: the library's own methods, in PyTorch
LIBRARY_BACKENDS = (None, DEFAULT_BACKEND, REFERENCE)


def read_config(path: Path, name: str) -> dict[str, Any]:
    """A model configuration file, without the keys that only record versions; {} where absent."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{name}: cannot read {path}: {exc}") from None
    return {k: v for k, v in data.items() if k not in VERSION_KEYS} if isinstance(data, dict) else {}


def transformer_folder(folder: Path) -> Path:
    """The folder of the model's transformer: its ``modules.json`` Transformer module's, or the
    folder itself (a hub checkpoint of the older layout is one transformers model)."""
    return sentence_transformer_tokenizer_folder(folder) or folder


def modules(folder: Path) -> list[dict[str, Any]]:
    """``modules.json``: each module's class and folder, in order (none for an older checkpoint)."""
    try:
        listed = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []


def folder_configs(folder: Path, name: str) -> dict[str, Any]:
    """Every configuration file that decides how a folder's model works, by relative path: the
    modules' classes in order (``modules.json``), sentence-transformers' model configuration, then
    each module's ``config.json`` and ``sentence_bert_config.json``."""
    listed = modules(folder)
    paths = dict.fromkeys([str(m.get("path", "")) for m in listed] or [""])
    files = ["config_sentence_transformers.json"]
    files += [str(Path(p) / f) for p in paths for f in ("config.json", "sentence_bert_config.json")]
    configs: dict[str, Any] = {"modules.json": [m.get("type") for m in listed]} if listed else {}
    return {**configs, **{f: config for f in files if (config := read_config(folder / f, name))}}


def module_weights(folder: Path) -> dict[str, str]:
    """The sha256 of each module's own weights (a projection's ``Dense``, a static embedding), by
    module folder; the transformer's, in the model's folder, are the source's ``weights_sha256``."""
    paths = [str(m["path"]) for m in modules(folder) if m.get("path")]
    held = [p for p in paths if any((folder / p / w).is_file() for w in WEIGHT_FILES)]
    return {p: weights_fingerprint(str(folder / p)) for p in held}


def declared_max_length(folder: Path, name: str) -> int | None:
    """The most tokens of a text the model reads, as sentence-transformers' Transformer module sets
    it: the module's ``max_seq_length`` where its configuration gives one, else the tokenizer's
    ``model_max_length`` capped at the model's ``max_position_embeddings``."""
    transformer = transformer_folder(folder)
    module = read_config(transformer / "sentence_bert_config.json", name)
    if module.get("max_seq_length") is not None:
        return int(module["max_seq_length"])
    limit = read_config(transformer / "tokenizer_config.json", name).get("model_max_length")
    positions = read_config(transformer / "config.json", name).get("max_position_embeddings")
    bounds = [int(v) for v in (limit, positions) if isinstance(v, (int, float)) and 0 < v < 1e18]
    return min(bounds) if bounds else None


def folder_identity(source: ModelSource, name: str) -> dict[str, Any]:
    """What pins a folder's model, whatever its kind: weights, each module's own weights, every
    configuration file and the token limit (a kind adds its own settings)."""
    folder = source.path
    return {
        "family": "sentence-transformers",
        "model": source.name,
        "revision": source.revision,
        "weights_sha256": source.weights_sha256,
        "module_weights": module_weights(folder),
        "modules": folder_configs(folder, name),
        "max_length": declared_max_length(folder, name),
    }


def object_module_configs(model: Any) -> dict[str, Any]:
    """A loaded model's modules: each one's class, in order, and configuration (pooling mode,
    normalisation, max sequence length, a projection's sizes)."""
    configs: dict[str, Any] = {"modules": [f"{type(m).__module__}.{type(m).__name__}" for m in model]}
    for index, module in enumerate(model):
        get = getattr(module, "get_config_dict", None)
        if get is not None:
            configs[f"{index}/config"] = get()
    return configs


def object_identity(
    model: Any, source: ModelSource, configs: dict[str, Any] | None = None, **settings: Any
) -> dict[str, Any]:
    """What pins a model held in memory, whatever its kind: the weights it holds now (``source``, a
    ``HeldSource``), each module's configuration (and ``configs``, what the kind reads beside them),
    the token limit, and ``settings``, what the kind adds."""
    return {
        "family": "sentence-transformers-object",
        "model": source.name,
        "weights_sha256": source.weights_sha256,
        "modules": {**object_module_configs(model), **(configs or {})},
        "max_length": model.max_seq_length,
        **settings,
    }


def role_method(model: Any, role: Role) -> Callable[..., Any]:
    """The method a model encodes a role's texts with, as sentence-transformers' evaluators call it:
    ``encode_query`` for queries, ``encode_document`` for documents, ``encode`` for a symmetric task."""
    return {"query": model.encode_query, "document": model.encode_document}.get(role.name or "", model.encode)


def unused_poolers(model: Any) -> tuple[str, ...]:
    """The weight prefixes of a loaded model's Transformer modules' poolers: sentence-transformers'
    Transformer module passes token states on, so a pooler's weights (random where the checkpoint
    has none) never reach an output and stay out of its fingerprint."""
    return tuple(
        f"{i}.{path}."
        for i, module in enumerate(model)
        if type(module).__name__ == "Transformer"
        for path, _ in module.named_modules()
        if path.rsplit(".", 1)[-1] == "pooler"
    )


def library_sizes(name: str, what: str, spec: Params, context: BuildContext) -> dict[str, Any]:
    """The batch size and device a spec (or the run) gives a model of another kind; ``precision=``
    and ``backend=`` choose the dense inference engine, which does not run it, and are refused."""
    precision, backend = spec.get("precision", "fp32"), spec.get("backend")
    if precision != "fp32" or backend not in LIBRARY_BACKENDS:
        raise InvalidInputError(
            f"encoder {name!r}: {what} runs through sentence-transformers' own methods in fp32; precision= and "
            "backend= choose the dense inference engine, so leave them out"
        )
    return {**context.sizes(), **{k: spec[k] for k in ("batch_size", "device") if k in spec}}


class LibraryModel(KindModel):
    """A model of another kind run by sentence-transformers' own methods: its batch size, the device
    it is put on when loaded (or the one it is on, held in memory), and the model once loaded."""

    def __init__(self, name: str, batch_size: int, device: str | None) -> None:
        super().__init__(name)
        self.batch_size = checked_batch_size(name, batch_size)
        self._device = DeviceChoice(device)
        self._model: Any = None

    def _load(self, library_class: Callable[..., Any], folder: Path) -> Any:
        """``library_class`` (``SparseEncoder``...) loaded from ``folder`` with ``local_files_only`` on
        the device chosen, transformers' loading reports kept off the console."""
        with quiet_loading():
            return library_class(str(folder), device=str(self._device.get()), local_files_only=True)
