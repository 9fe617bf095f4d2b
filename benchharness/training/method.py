"""The contract between a training method and the harness.

A method is one value, :class:`Method`, declared as a ``methods`` plugin (an entry point naming it,
or ``PLUGINS.register("methods", name, METHOD)``). It declares what only it knows: its options class
(a frozen dataclass extending ``options.TrainingOptions``) and presets, its examples
(``examples(options, data)``: what it trains on, read from the data root or the sentences a caller
holds) and its model (``build(options, base, data)``: its trainable module, a
:class:`TrainingMethod`, around the base encoder). The model class names its options and presets
beside the module, so a declaration names only its model and what is the method's own
(``Method.of(Model, help=..., title=..., examples=...)``). The harness (``harness.py``) does the rest for
every method alike: the checks before any model loads, the base model, the loop with its dev
evaluation, the outputs, and the counting (the example count is the examples'). A method that trains
in stages (DefSent+'s rounds) declares ``stages`` instead of ``build`` and drives its stages through
the harness's ``Trainer``.

Where and how a run goes is never the method's: that is the settings (``settings.py``) and the plan
(``plan.py``) the command line, the recipes and ``benchharness.train`` build.

The loop trains every parameter of the module (training-only heads included) but keeps only
``module.encoder`` and ``module.tokenizer``: the encoder is what the harness evaluates, the heads are
scaffolding that a trained encoder must not depend on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import torch
from torch import nn

from benchharness.core.data_root import DataRoot
from benchharness.training.base_model import Base
from benchharness.training.options import Adjust, TrainingOptions
from benchharness.training.train_data import load_sentences

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from benchharness.core.manifests import RunManifest


@dataclass
class LossOutput:
    """What a module's ``forward`` returns: the loss to minimise and scalars worth logging."""

    loss: torch.Tensor
    logs: dict[str, float] = field(default_factory=dict)


class TrainingMethod(nn.Module):
    """Base class of a method's trainable module.

    Its constructor takes the base encoder, its tokenizer and the run's options; the harness builds it
    (:meth:`build`) right after seeding with the run's seed, so that randomly initialised heads are
    reproducible. Implement ``collate(examples) -> batch`` (CPU tensors in a dict, or anything
    ``loop.to_device`` moves) and ``forward(batch) -> LossOutput``, passing the sentence embedding
    through :meth:`sized` (what lets any method train with a Matryoshka loss); set ``eval_pooling`` (a name
    of ``benchharness.encoders.pooling.POOLINGS``, used at dev evaluation and written into the manifest);
    optionally override ``hyperparameters()`` (method settings for the manifest) and ``size``. The
    class names the options its constructor takes and their presets, which :meth:`Method.of` declares.
    """

    #: method name, as in its ``methods`` plugin entry and the manifest
    method_name: str = ""
    #: the options class its constructor takes (a frozen dataclass extending ``TrainingOptions``)
    options_class: ClassVar[type[TrainingOptions]] = TrainingOptions
    #: option values by preset name (``--preset``), and the preset a run that names none takes
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    default_preset: ClassVar[str | None] = None
    #: pooling at evaluation (and in the manifest)
    eval_pooling: str = "avg"
    #: whether the loss scores rows against the batch's other rows (``data_parallel.in_batch``), which a
    #: data-parallel run can only gather from equal slices of every batch
    in_batch_negatives: bool = False

    def __init__(self, encoder: PreTrainedModel, tokenizer: Any) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        #: the size a Matryoshka loss is scoring now (None: the whole embedding), and whether
        #: ``forward`` passed its embedding through :meth:`sized` (``training/matryoshka.py``)
        self.matryoshka_size: int | None = None
        self.sized_called = False

    def sized(self, embedding: torch.Tensor) -> torch.Tensor:
        """The sentence embedding the evaluation pools, as the loss may read it: whole, or with every
        dimension past ``matryoshka_size`` zeroed while a Matryoshka loss scores that size.

        A method calls it on that embedding before any training head reads it. Zeros, not a
        slice: a cosine of the zeroed vector is the cosine of the first d dimensions, and a head
        built for the full width (SimCSE's MLP, DefSent+'s pooler) reads the first d dimensions
        only; at the full size the loss is the method's own, unchanged."""
        self.sized_called = True
        size = self.matryoshka_size
        if size is None or size >= embedding.shape[-1]:
            return embedding
        return torch.nn.functional.pad(embedding[..., :size], (0, embedding.shape[-1] - size))

    @classmethod
    def build(cls, options: Any, base: Base, data: DataRoot) -> TrainingMethod:
        """The module of a run (a ``Method``'s ``build``): ``cls(encoder, tokenizer, options)``. A
        module that needs more of the base (where it came from) or of the data root overrides it."""
        return cls(base.encoder, base.tokenizer, options)  # type: ignore[call-arg]

    def collate(self, examples: list[Any]) -> Any:
        raise NotImplementedError

    def forward(self, batch: Any) -> LossOutput:
        raise NotImplementedError

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    def size(self, batch: Any, examples: list[Any]) -> int:
        """Sentences processed for this batch (throughput); views are not counted twice."""
        return len(examples)


@dataclass
class TrainedRun:
    """One trained encoder: its module, its tokenizer, its record. In memory the module holds the
    selected weights; with an output folder it holds the run's final weights and the folder the
    selected ones (``trained.selected_encoder`` reads them).

    ``manifest`` is None for a run paused by ``stop_after`` (and on the ranks > 0 of a data-parallel
    run); ``metrics`` is the training log; ``files`` are a method's other outputs by file name
    (DefSent+'s entry-space plots), written beside the manifest."""

    encoder: PreTrainedModel
    tokenizer: Any
    manifest: RunManifest | None
    metrics: list[dict[str, Any]]
    out: Path | None
    steps: int
    completed: bool
    best_step: int | None
    best_dev: float | None
    files: dict[str, bytes] = field(default_factory=dict)


#: the ``kind`` of examples that are unlabeled sentences (which ``sentences=`` may stand for, and whose
#: repeats the harness warns about)
SENTENCES = "unlabeled sentences"


@dataclass
class Examples:
    """A run's training examples (any indexable sequence its module's ``collate`` takes) and what
    its manifest records of them (``name``, ``kind``, ``n_examples``, a method's own statistics)."""

    items: Sequence[Any]
    record: dict[str, Any]

    def limited(self, limit: int | None) -> Examples:
        """The first ``limit`` examples (all without a limit); the record keeps the full count and
        notes the limit."""
        if not limit:
            return self
        return Examples(self.items[:limit], {**self.record, "limit": limit})


@dataclass(frozen=True)
class TrainingData:
    """Where a method's examples come from: the data root (corpora, NLI files, dictionaries) and the
    sentences a caller holds in memory (``benchharness.train(sentences=[...])``), which stand for
    the options' ``data``."""

    root: DataRoot
    held: tuple[str, ...] | None = None


def sentences(options: TrainingOptions, data: TrainingData) -> Examples:
    """The ``examples`` of a method that trains on unlabeled sentences: those held in memory, else the
    corpus ``options.data`` names."""
    items = list(data.held) if data.held is not None else load_sentences(options.data, data.root)
    return Examples(items, {"name": options.data, "kind": SENTENCES, "n_examples": len(items)})


OptionsT = TypeVar("OptionsT", bound=TrainingOptions)


@dataclass(frozen=True)
class Method(Generic[OptionsT]):
    """A training method, as a ``methods`` plugin declares it.

    ``examples(options, data)`` reads what the method trains on (:class:`TrainingData`: the data
    root, or sentences held in memory); the harness cuts them to ``options.limit`` and counts them
    (the time estimate's count). ``build(options, base, data)`` makes the trainable module from the
    base model (``base_model.Base``: encoder, tokenizer, where they came from), after the harness has
    seeded the run, so that the heads it draws are reproducible; ``data`` is the data root, for a
    module that reads resources there (PaSeR's WordNet). A method that trains in stages declares
    ``stages(options, examples, trainer)`` instead, which returns one run per stage (the last being
    the method's encoder) and trains each through the harness's ``harness.Trainer``. ``adjust`` is a
    method's own step of option resolution (``options.resolve``); ``describe_data(options, examples,
    tokenizer)`` summarises the training data (``--stats-only``). A method whose model class builds
    its module is declared with :meth:`of`, which reads the rest from that class."""

    name: str
    help: str
    title: str  # the method's own group of flags in ``benchharness train <name> -h``
    options: type[OptionsT]
    examples: Callable[[OptionsT, TrainingData], Examples]
    build: Callable[[OptionsT, Base, DataRoot], TrainingMethod] | None = None
    stages: Callable[[OptionsT, Examples, Any], list[TrainedRun]] | None = None
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    default_preset: str | None = None
    adjust: Adjust | None = None
    describe_data: Callable[[OptionsT, Examples, Any], str] | None = None

    @staticmethod
    def of(
        model: type[TrainingMethod],
        *,
        help: str,
        title: str,
        examples: Callable[[Any, TrainingData], Examples],
        adjust: Adjust | None = None,
    ) -> Method[Any]:
        """The method whose module ``model`` builds (``model.build``): its name, options class, presets
        and default preset are the model's (``method_name``, ``options_class``, ``presets``,
        ``default_preset``), so the declaration names only the method's own: its help, its title, its
        examples and its own step of option resolution."""
        return Method(
            name=model.method_name,
            help=help,
            title=title,
            options=model.options_class,
            examples=examples,
            build=model.build,
            presets=model.presets,
            default_preset=model.default_preset,
            adjust=adjust,
        )

    def __post_init__(self) -> None:
        if (self.build is None) == (self.stages is None):
            raise TypeError(f"method {self.name!r}: declare either build (one module) or stages, not both or neither")
