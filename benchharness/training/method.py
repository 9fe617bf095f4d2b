"""The contract between a training method and the harness.

A method is one value, :class:`Method`, declared as a ``methods`` plugin (an entry point naming it,
or ``PLUGINS.register("methods", name, METHOD)``). It names its options class (a frozen dataclass
extending ``options.TrainingOptions``), its presets, and one function, ``train(options, context)``,
that loads its data and base model, builds its trainable module (a :class:`TrainingMethod`) and runs
the shared loop (``launch.run_method``). Everything that says where and how a run goes (the base,
the device, the data root, the Hugging Face settings, the dev evaluation, the output folder or none,
progress) comes in the :class:`TrainingContext`; everything that says what is trained comes in the
options. The command line, the recipes and ``benchharness.train`` build the same two values.

The loop trains every parameter of the module (training-only heads included) but keeps only
``module.encoder`` and ``module.tokenizer``: the encoder is what the harness evaluates, the heads are
scaffolding that a trained encoder must not depend on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import torch
from torch import nn

from benchharness.core.data_root import DataRoot
from benchharness.core.settings import HubSettings
from benchharness.training.options import Adjust, TrainingOptions

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

    Construct it after ``seed_everything(options.seed)`` so that randomly initialised heads are
    reproducible. Implement ``collate(examples) -> batch`` (CPU tensors in a dict, or anything
    ``loop.to_device`` moves) and ``forward(batch) -> LossOutput``, passing the sentence embedding
    through :meth:`sized` (what lets any method train with a Matryoshka loss); set ``eval_pooling`` (a name
    of ``benchharness.encoders.pooling.POOLINGS``, used at dev evaluation and written into the manifest);
    optionally override ``hyperparameters()`` (method settings for the manifest) and ``size``.
    """

    #: method name, as in its ``methods`` plugin entry and the manifest
    method_name: str = ""
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

    def collate(self, examples: list[Any]) -> Any:
        raise NotImplementedError

    def forward(self, batch: Any) -> LossOutput:
        raise NotImplementedError

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    def size(self, batch: Any, examples: list[Any]) -> int:
        """Sentences processed for this batch (throughput); views are not counted twice."""
        return len(examples)


class DevEvaluation(Protocol):
    """A dev evaluation the loop can call, and the name of the task it scores on (for the manifest)."""

    task_name: str

    def __call__(self, encoder: nn.Module, /) -> float: ...


#: builds the dev evaluation of a run: its module (tokenizer, pooling), options and context
DevFactory = Callable[[TrainingMethod, TrainingOptions, "TrainingContext"], DevEvaluation]


@dataclass(frozen=True)
class TrainingContext:
    """Where and how a run goes: never part of what it trains, so never part of a recipe key.

    ``base`` is the model to start from (a hub id or a model folder), ``data`` the data root the
    method reads its corpus from and the dev evaluation its dev split from, ``hub`` where hub
    models are found. ``out`` is the output folder (resumable, registered by its ``manifest.json``);
    None trains in memory and writes nothing. ``dev`` builds the dev evaluation (None: a run that
    asks for one is refused). ``sentences`` stands for the options' ``data`` when given (a list
    held in memory)."""

    base: str
    data: DataRoot
    hub: HubSettings
    out: Path | None = None
    name: str | None = None
    device: str | None = None
    threads: int | None = None
    stop_after: int | None = None
    overwrite: bool = False
    keep_checkpoint: bool = False
    dev: DevFactory | None = None
    progress: bool = False
    sentences: tuple[str, ...] | None = None

    def record(self) -> dict[str, Any]:
        """The context as the loop's checkpoint has always recorded it beside the shared options
        (a resumed run compares them: only ``resume.RESUMABLE_CHANGES`` may differ)."""
        return {
            "base": self.base,
            "out": None if self.out is None else str(self.out),
            "name": self.name,
            "device": self.device,
            "threads": self.threads,
            "stop_after": self.stop_after,
            "overwrite": self.overwrite,
            "keep_checkpoint": self.keep_checkpoint,
        }


@dataclass
class TrainedRun:
    """One trained encoder: its module, its tokenizer, its record. In memory the module holds the
    selected weights; with an output folder it holds the run's final weights and ``<out>/model`` the
    selected ones (:func:`selected_encoder` reads them).

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


def selected_encoder(run: TrainedRun) -> PreTrainedModel:
    """The encoder a run selected: the module itself in memory, else the model its folder holds."""
    if run.out is None or run.manifest is None or run.manifest["selection"]["rule"] == "final weights":
        return run.encoder
    from benchharness.encoders.checkpoint import load_complete

    return load_complete(run.out / "model", str(run.out))


OptionsT = TypeVar("OptionsT", bound=TrainingOptions)


@dataclass(frozen=True)
class Method(Generic[OptionsT]):
    """A training method, as a ``methods`` plugin declares it.

    ``train(options, context)`` returns the trained runs, one per stage the method produces (one,
    or one per DefSent+ round, the last being the method's encoder). ``count_examples`` says how
    many training examples a run sees per epoch (per round), for the time estimate of on-demand
    training. ``adjust`` is a method's own step of option resolution (``options.resolve``).
    ``describe_data`` summarises the training data (``--stats-only``)."""

    name: str
    help: str
    title: str  # the method's own group of flags in ``benchharness train <name> -h``
    options: type[OptionsT]
    train: Callable[[OptionsT, TrainingContext], list[TrainedRun]]
    count_examples: Callable[[OptionsT, DataRoot], int]
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    default_preset: str | None = None
    adjust: Adjust | None = None
    describe_data: Callable[[OptionsT, TrainingContext], str] | None = None
