"""What a training method's author needs, in one import.

A method (see ``methods/simcse/`` for a complete one, ``docs/examples/align-uniform-method/`` for a
plugin package):

1. declares its options as a frozen dataclass extending :class:`TrainingOptions`, each field an
   :func:`option` with its default, help and checks (a shared setting it gives another default:
   :func:`shared_option`), and optionally presets (field values by preset name);
2. subclasses :class:`TrainingMethod` (its constructor receives the base encoder, a transformers
   ``AutoModel``, and its tokenizer; training-only heads are further submodules; it implements
   ``collate`` and ``forward`` returning a :class:`LossOutput`, and sets ``eval_pooling``);
3. writes ``train(options, context)``: its data (:func:`training_sentences`), :func:`preflight`,
   the base model (:func:`base_model`), its module, then :func:`run_method`, the shared loop with
   the dev evaluation, which returns a :class:`TrainedRun`;
4. declares all of it as one :class:`Method`, a ``benchharness.methods`` entry point (or
   ``PLUGINS.register("methods", name, METHOD)``). ``benchharness train <name>`` derives its flags
   from the declaration; ``benchharness.train(name, base=..., **options)`` trains it from Python.

The optimizer: ``options.optimizer`` is ``torch-adamw`` (``torch.optim.AdamW``) unless set; the four
built-in methods' presets set ``adamw-legacy`` (:class:`LegacyAdamW`), the legacy ``transformers.AdamW``
their official code steps with, and clip the gradient norm at 1.0 as it does.
"""

from benchharness.core.seeding import seed_everything
from benchharness.training.base_model import base_folder, load_base
from benchharness.training.launch import base_model, preflight, run_method, training_sentences
from benchharness.training.loop import DevScore, linear_schedule, make_optimizer, run_loop
from benchharness.training.method import LossOutput, Method, TrainedRun, TrainingContext, TrainingMethod
from benchharness.training.optim import LegacyAdamW
from benchharness.training.options import TrainingOptions, option, shared_option

__all__ = [
    "DevScore",
    "LegacyAdamW",
    "LossOutput",
    "Method",
    "TrainedRun",
    "TrainingContext",
    "TrainingMethod",
    "TrainingOptions",
    "base_folder",
    "base_model",
    "linear_schedule",
    "load_base",
    "make_optimizer",
    "option",
    "preflight",
    "run_loop",
    "run_method",
    "seed_everything",
    "shared_option",
    "training_sentences",
]
