"""What a training method's author needs, in one import.

A method (see ``methods/simcse/`` for a complete one, ``docs/examples/align-uniform-method/`` for a
plugin package) is a declaration plus a model:

1. its options, a frozen dataclass extending :class:`TrainingOptions`, each field an :func:`option`
   with its default, help and checks (a shared setting it gives another default:
   :func:`shared_option`), and optionally presets (field values by preset name);
2. its model, a :class:`TrainingMethod` subclass: its constructor receives the base encoder (a
   transformers ``AutoModel``), its tokenizer and the options; training-only heads are further
   submodules; it implements ``collate`` and ``forward`` returning a :class:`LossOutput`, passes its
   sentence embedding through ``sized``, sets ``eval_pooling``, and names the method and its options
   (``method_name``, ``options_class``, and any ``presets`` and ``default_preset``);
3. one :class:`Method`, ``Method.of(<model>, help=..., title=..., examples=...)``, with its examples
   (:func:`sentences` for a method that trains on unlabeled sentences, else a function of the options
   and the :class:`TrainingData` returning :class:`Examples`), declared as a ``benchharness.methods``
   entry point (or ``PLUGINS.register("methods", name, METHOD)``). ``benchharness train <name>`` derives its flags
   from the declaration; ``benchharness.train(name, base=..., **options)`` trains it from Python.

The harness does the rest: the checks before any model loads, the base model (seeded), the loop with
its dev evaluation and checkpoints, the outputs. To run the loop on a module directly (a test, a
notebook), :func:`run_loop` takes it with a :class:`TrainSettings` and a :class:`Plan`.

The optimizer: ``options.optimizer`` is ``torch-adamw`` (``torch.optim.AdamW``) unless set; the four
built-in methods' presets set ``adamw-legacy`` (:class:`LegacyAdamW`), the legacy ``transformers.AdamW``
their official code steps with, and clip the gradient norm at 1.0 as it does.
"""

from benchharness.core.seeding import seed_everything
from benchharness.training.base_model import Base, base_folder, load_base
from benchharness.training.loop import DevScore, linear_schedule, make_optimizer, run_loop
from benchharness.training.method import (
    Examples,
    LossOutput,
    Method,
    TrainedRun,
    TrainingData,
    TrainingMethod,
    sentences,
)
from benchharness.training.optim import LegacyAdamW
from benchharness.training.options import TrainingOptions, option, shared_option
from benchharness.training.plan import Plan
from benchharness.training.settings import TrainSettings

__all__ = [
    "Base",
    "DevScore",
    "Examples",
    "LegacyAdamW",
    "LossOutput",
    "Method",
    "Plan",
    "TrainSettings",
    "TrainedRun",
    "TrainingData",
    "TrainingMethod",
    "TrainingOptions",
    "base_folder",
    "linear_schedule",
    "load_base",
    "make_optimizer",
    "option",
    "run_loop",
    "seed_everything",
    "sentences",
    "shared_option",
]
