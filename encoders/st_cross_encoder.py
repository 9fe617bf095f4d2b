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
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.kind_models import PairModel
from benchharness.core.progress import shown
from benchharness.core.prompts import Prompts, check_prompt
from benchharness.core.specs import BuildContext, Params
from benchharness.encoders.checkpoint import quiet_loading, weights_file
from benchharness.encoders.hub import ModelSource
from benchharness.encoders.in_memory import HeldSource, evaluating
from benchharness.encoders.st_folder import (
    VERSION_KEYS,
    LibraryModel,
    folder_identity,
    library_sizes,
    object_identity,
    read_config,
    transformer_folder,
)
from benchharness.scoring.pair_view import as_scores

#: what ``CrossEncoder`` applies to a one-label model's logit, and to a model of several labels, when
#: its configuration names no activation (``CrossEncoder.get_default_activation_fn``)
SIGMOID, IDENTITY = "torch.nn.modules.activation.Sigmoid", "torch.nn.modules.linear.Identity"


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
    transformer = read_config(transformer_folder(folder) / "config.json", name)
    declared = [
        read_config(folder / "config_sentence_transformers.json", name).get("activation_fn"),
        (transformer.get("sentence_transformers") or {}).get("activation_fn"),
        transformer.get("sbert_ce_default_activation_function"),
    ]
    chosen = next((path for path in declared if path is not None), None)
    if isinstance(chosen, str) and chosen.startswith("torch."):
        return chosen
    return SIGMOID if declared_labels(transformer) == 1 else IDENTITY


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


class CrossEncoderModel(LibraryModel, PairModel):
    """What both ways of holding a ``CrossEncoder`` share: scoring pairs with ``predict``."""

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

    def __init__(self, name: str, source: ModelSource, batch_size: int = 64, device: str | None = None) -> None:
        super().__init__(name, batch_size, device)
        self.source = source
        transformer = read_config(transformer_folder(source.path) / "config.json", name)
        if sequence_classifier(transformer):
            one_label(declared_labels(transformer), name)
        settings = read_config(source.path / "config_sentence_transformers.json", name)
        self.prompts = default_prompts(
            settings.get("prompts") or {}, settings.get("default_prompt_name"), f"{name}: {source.path}"
        )

    @property
    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            _refuse_random_head(transformer_folder(self.source.path), self.name)
            model = self._load(CrossEncoder, self.source.path)
            one_label(model.num_labels, self.name)
            self._model = model
        return self._model

    def identity_info(self) -> dict[str, Any]:
        return {
            **folder_identity(self.source, self.name),
            "activation_fn": declared_activation(self.source.path, self.name),
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
    if not sequence_classifier(read_config(folder / "config.json", name)):
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
        super().__init__(name, batch_size, device)
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
        return object_identity(
            model, self.source, {"config.json": config}, activation_fn=activation_name(model.activation_fn)
        )


def build(name: str, spec: Params, context: BuildContext, source: ModelSource) -> CrossEncoderFolder:
    """``st:<folder>`` of a cross-encoder (``encoders.sbert.build`` dispatches here on the folder's kind)."""
    return CrossEncoderFolder(name, source, **library_sizes(name, "a cross-encoder", spec, context))


def from_object(model: Any, name: str, batch_size: int | None = None, device: str | None = None) -> CrossEncoderObject:
    """A ``CrossEncoder`` passed to ``benchharness.evaluate``."""
    return CrossEncoderObject(name, model, **({} if batch_size is None else {"batch_size": batch_size}), device=device)
