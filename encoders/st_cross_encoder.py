"""sentence-transformers' ``CrossEncoder``: a score for each (query, document) pair, read together.

``st:<hub id or folder>`` builds one of these when the folder is a cross-encoder
(``encoders.model_type``: ``model_type: CrossEncoder``, or a hub checkpoint of the older layout, a
``...ForSequenceClassification`` model with no ``modules.json``); a ``CrossEncoder`` object given to
``benchharness.evaluate`` is wrapped by ``from_object``. Either way the pairs are scored by the
model's own ``CrossEncoder.predict``, as ``CrossEncoderRerankingEvaluator`` and
``CrossEncoderCorrelationEvaluator`` score them: batches of pairs sorted by length (``predict``
sorts by the pair's characters, longest first, and restores the order), the model's activation
function applied to its logit (sigmoid for a one-label model unless the model configures another).

The identity pins what decides a score: the weights, every configuration file of the model's
modules (``config.json`` holds ``num_labels``), the activation function ``CrossEncoder`` applies, the
token limit of a pair, and the prompt (``CrossEncoder.predict`` puts the model's default prompt in
front of a pair's first text; ``scoring.pair_view`` applies it, so that a task instruction can take
its place as it does for a dense model). A model with several labels (an NLI classifier) gives no
single score for a pair and is refused when it is built.
"""

from __future__ import annotations

import inspect
import json
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.devices import DeviceChoice
from benchharness.core.errors import InvalidInputError
from benchharness.core.kind_models import PairModel
from benchharness.core.progress import shown
from benchharness.core.prompts import Prompts, check_prompt
from benchharness.core.specs import BuildContext, Params
from benchharness.encoders.backends import REFERENCE
from benchharness.encoders.checkpoint import quiet_loading, weights_file
from benchharness.encoders.hub import ModelSource
from benchharness.encoders.in_memory import HeldSource, evaluating
from benchharness.encoders.tokenizer_files import sentence_transformer_tokenizer_folder
from benchharness.scoring.pair_view import PAIR_SCORE, as_scores

#: what ``CrossEncoder`` applies to a one-label model's logit, and to a model of several labels, when
#: its configuration names no activation (``CrossEncoder.get_default_activation_fn``)
SIGMOID, IDENTITY = "torch.nn.modules.activation.Sigmoid", "torch.nn.modules.linear.Identity"
#: keys of a configuration file that say which library versions wrote it, not how the model scores
VERSION_KEYS = ("__version__", "transformers_version", "_name_or_path")
#: the backends of ``st:`` that run a cross-encoder: ``CrossEncoder.predict`` itself, in PyTorch
BACKENDS = (None, "eager", REFERENCE)


def _read_json(path: Path, name: str) -> dict[str, Any]:
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


def folder_configs(folder: Path, name: str) -> dict[str, Any]:
    """Every configuration file that decides how a cross-encoder folder scores, by relative path:
    ``modules.json`` and sentence-transformers' model configuration, then each module's
    ``config.json`` and ``sentence_bert_config.json`` (the transformer's ``config.json`` holds its
    architecture and ``num_labels``)."""
    modules = json.loads((folder / "modules.json").read_text()) if (folder / "modules.json").is_file() else []
    paths = dict.fromkeys([str(m.get("path", "")) for m in modules if isinstance(m, dict)] or [""])
    files = ["modules.json", "config_sentence_transformers.json"]
    files += [str(Path(p) / f) for p in paths for f in ("config.json", "sentence_bert_config.json")]
    return {f: config for f in files if (config := _read_json(folder / f, name))}


def declared_labels(config: dict[str, Any]) -> int:
    """A transformers config's ``num_labels``, as ``PretrainedConfig`` reads it (2 when unsaid)."""
    labels = config.get("id2label")
    return len(labels) if isinstance(labels, dict) and labels else int(config.get("num_labels", 2))


def declared_activation(folder: Path, name: str) -> str:
    """The activation ``CrossEncoder`` applies to the model's logits, as it resolves it from the
    folder: ``config_sentence_transformers.json``'s ``activation_fn``, else ``config.json``'s
    (``sentence_transformers.activation_fn``, or the older ``sbert_ce_default_activation_function``);
    a path outside ``torch.`` is not trusted (loading runs no remote code) and the default applies:
    sigmoid for one label, identity for several."""
    transformer = _read_json(transformer_folder(folder) / "config.json", name)
    declared = [
        _read_json(folder / "config_sentence_transformers.json", name).get("activation_fn"),
        (transformer.get("sentence_transformers") or {}).get("activation_fn"),
        transformer.get("sbert_ce_default_activation_function"),
    ]
    chosen = next((path for path in declared if path is not None), None)
    if isinstance(chosen, str) and chosen.startswith("torch."):
        return chosen
    return SIGMOID if declared_labels(transformer) == 1 else IDENTITY


def declared_max_length(folder: Path, name: str) -> int | None:
    """The most tokens of a pair the model reads, as sentence-transformers' Transformer module
    sets it: the module's ``max_seq_length`` where its configuration gives one, else the
    tokenizer's ``model_max_length`` capped at the model's ``max_position_embeddings``."""
    transformer = transformer_folder(folder)
    module = _read_json(transformer / "sentence_bert_config.json", name)
    if module.get("max_seq_length") is not None:
        return int(module["max_seq_length"])
    limit = _read_json(transformer / "tokenizer_config.json", name).get("model_max_length")
    positions = _read_json(transformer / "config.json", name).get("max_position_embeddings")
    bounds = [int(v) for v in (limit, positions) if isinstance(v, (int, float)) and 0 < v < 1e18]
    return min(bounds) if bounds else None


def activation_name(fn: Any) -> str:
    """An activation as ``CrossEncoder`` saves it (``fullname``: a module's class), or a function's
    own qualified name (``torch.sigmoid``), which ``fullname`` would give as its type's."""
    if inspect.isfunction(fn) or inspect.isbuiltin(fn):
        return f"{fn.__module__}.{fn.__qualname__}"
    from sentence_transformers.util import fullname

    return str(fullname(fn))


def default_prompts(prompts: Any, default_name: str | None, where: str) -> Prompts:
    """The prompt ``CrossEncoder.predict`` applies when none is named: ``default_prompt_name``'s
    (its other named prompts are applied only on request, which no evaluator makes)."""
    if not default_name:
        return Prompts()
    if not isinstance(prompts, dict) or default_name not in prompts:
        raise InvalidInputError(f"{where}: default_prompt_name {default_name!r} is not one of its prompts")
    return Prompts(default=check_prompt(where, f"prompt {default_name!r}", prompts[default_name]) or None)


def sequence_classifier(config: dict[str, Any]) -> bool:
    """Whether a transformers config declares a sequence classifier (a head read through its pooler)."""
    return any(str(a).endswith("ForSequenceClassification") for a in config.get("architectures") or [])


def one_label(labels: int, name: str) -> None:
    """Refuse a model of several labels: a classifier's outputs are no single score of a pair."""
    if labels != 1:
        raise InvalidInputError(
            f"{name} is a cross-encoder with {labels} labels (a classifier, such as an NLI model), which gives no "
            "single score for a pair; benchharness scores pairs with one-label cross-encoders (rerankers, STS)"
        )


class CrossEncoderModel(PairModel):
    """What both ways of holding a ``CrossEncoder`` share: scoring pairs with ``predict``."""

    similarity = PAIR_SCORE

    def __init__(self, name: str, batch_size: int) -> None:
        super().__init__(name)
        if int(batch_size) < 1:
            raise InvalidInputError(f"encoder {name!r}: batch_size must be a positive number, got {batch_size}")
        self.batch_size = int(batch_size)

    @property
    @abstractmethod
    def model(self) -> Any:
        """The ``CrossEncoder``."""

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """``CrossEncoder.predict`` on the pairs as given (the view put any prompt in front of their
        texts already, so the model's default prompt is not applied twice), in eval mode."""
        if not pairs:
            return np.zeros(0)
        model = self.model
        with evaluating(model):
            scores = model.predict(
                [[left, right] for left, right in pairs],
                prompt="",
                batch_size=self.batch_size,
                show_progress_bar=shown(),
                convert_to_numpy=True,
            )
        return as_scores(scores, len(pairs), f"cross-encoder {self.name!r}")


class CrossEncoderFolder(CrossEncoderModel):
    """A cross-encoder folder (``st:``), loaded when it first scores: a rerun whose scores are all
    cached loads nothing."""

    def __init__(
        self,
        name: str,
        source: ModelSource,
        batch_size: int = 64,
        device: str | None = None,
        precision: str = "fp32",
        backend: str | None = None,
    ) -> None:
        super().__init__(name, batch_size)
        if precision != "fp32" or backend not in BACKENDS:
            raise InvalidInputError(
                f"{name} is a cross-encoder, scored by CrossEncoder.predict in fp32 PyTorch; "
                f"precision={precision} and backend={backend} apply to dense encoders only"
            )
        self.source = source
        self._device = DeviceChoice(device)
        self._model: Any = None
        transformer = _read_json(transformer_folder(source.path) / "config.json", name)
        if sequence_classifier(transformer):
            one_label(declared_labels(transformer), name)
        settings = _read_json(source.path / "config_sentence_transformers.json", name)
        self.prompts = default_prompts(
            settings.get("prompts") or {}, settings.get("default_prompt_name"), f"{name}: {source.path}"
        )

    @property
    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            _refuse_random_head(transformer_folder(self.source.path), self.name)
            with quiet_loading():
                model = CrossEncoder(str(self.source.path), device=str(self._device.get()), local_files_only=True)
            one_label(model.num_labels, self.name)
            self._model = model
        return self._model

    def identity_info(self) -> dict[str, Any]:
        folder = self.source.path
        return {
            "family": "sentence-transformers",
            "model": self.source.name,
            "revision": self.source.revision,
            "weights_sha256": self.source.weights_sha256,
            "modules": folder_configs(folder, self.name),
            "activation_fn": declared_activation(folder, self.name),
            "max_length": declared_max_length(folder, self.name),
        }

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            **super().metadata,
            "base_model": self.source.name,
            "batch_size": self.batch_size,
            "device": self._device.chosen,
        }


def _refuse_random_head(folder: Path, name: str) -> None:
    """Refuse a sequence-classification checkpoint that lacks weights its model reads (a base model's
    folder whose config names a classifier it never trained): transformers would make them up at
    random, and ``CrossEncoder`` only logs it. The weights are loaded once more, briefly, to ask."""
    if not sequence_classifier(_read_json(folder / "config.json", name)):
        return
    from transformers import AutoModelForSequenceClassification

    with quiet_loading():
        _, info = AutoModelForSequenceClassification.from_pretrained(
            str(folder), output_loading_info=True, local_files_only=True
        )
    missing = sorted(info["missing_keys"]) or [str(k) for k in info.get("mismatched_keys") or []]
    if missing:
        raise InvalidInputError(
            f"{name}: {len(missing)} weights of its cross-encoder are missing from or mismatched in "
            f"{weights_file(folder)} ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); transformers "
            "would initialise them at random. Point st: at a trained cross-encoder, or train its head first."
        )


class CrossEncoderObject(CrossEncoderModel):
    """A ``CrossEncoder`` in memory, scored in eval mode and handed back in the mode it was in; its
    identity pins the weights it holds now, as ``SentenceTransformerObjectEncoder``'s does."""

    def __init__(self, name: str, model: Any, batch_size: int = 64, device: str | None = None) -> None:
        super().__init__(name, batch_size)
        one_label(model.num_labels, name)
        self._model = model if device is None else model.to(device)
        self.source = HeldSource.of(model, name, described_by=model.model)
        self.prompts = default_prompts(model.prompts, model.default_prompt_name, name)

    @property
    def model(self) -> Any:
        return self._model

    def identity_info(self) -> dict[str, Any]:
        model = self._model
        config = {k: v for k, v in model.model.config.to_dict().items() if k not in VERSION_KEYS}
        modules = [f"{type(m).__module__}.{type(m).__name__}" for m in model]
        return {
            "family": "sentence-transformers-object",
            "model": self.source.name,
            "weights_sha256": self.source.weights_sha256,
            "modules": {
                "modules": modules,
                "config.json": config,
                **{f"{i}/config": m.get_config_dict() for i, m in enumerate(model) if hasattr(m, "get_config_dict")},
            },
            "activation_fn": activation_name(model.activation_fn),
            "max_length": model.max_seq_length,
        }


def build(name: str, spec: Params, context: BuildContext, source: ModelSource) -> CrossEncoderFolder:
    """``st:<folder>`` of a cross-encoder (``encoders.sbert.build`` dispatches here on the folder's kind)."""
    params = {**context.sizes(), **{k: v for k, v in spec.items() if k != "model"}}
    return CrossEncoderFolder(name, source, **params)


def from_object(model: Any, name: str, batch_size: int | None = None, device: str | None = None) -> CrossEncoderObject:
    """A ``CrossEncoder`` passed to ``benchharness.evaluate``."""
    return CrossEncoderObject(name, model, **({} if batch_size is None else {"batch_size": batch_size}), device=device)
