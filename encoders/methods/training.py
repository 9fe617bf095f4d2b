"""The training API in one import, for method authors and tests.

A method (see ``consert/`` and ``simcse/`` for complete examples):

1. subclasses :class:`TrainingMethod` (``method.py``): its constructor receives the base encoder
   (a transformers ``AutoModel`` from :func:`load_base`, kept as ``self.encoder``) and tokenizer;
   training-only heads are further submodules; it implements ``collate`` and ``forward`` (a
   :class:`LossOutput`) and sets ``eval_pooling``;
2. builds a :class:`TrainConfig` (``train_config.py``; ``config_from_options`` merges the shared flags of
   ``add_training_arguments`` with a preset) and calls :func:`train` (``loop.py``) with its
   examples, any indexable sequence, and a ``dev`` callback when the config evaluates on a dev set;
3. gets a command (``<method>/command.py``: ``HELP``, ``add_arguments``, ``options``,
   ``count_examples``, ``main(args, dev)``), declared as a ``methods`` entry point in
   ``pyproject.toml`` (``benchharness.core.plugins.PLUGINS`` loads it).

The jobs live in their own modules: ``train_config.py`` (settings and flags), ``base_model.py``
(what a ``--base`` names), ``loop.py`` (the loop), ``optim.py`` (the legacy AdamW), ``resume.py``
(resumption, saving the encoder), ``manifest.py`` (the run's record). Seeding is
``benchharness.core.seeding.seed_everything``.

The optimizer: ``TrainConfig.optimizer`` is ``torch-adamw`` (``torch.optim.AdamW``) unless set;
the four methods' presets set ``adamw-legacy`` (:class:`LegacyAdamW`), the legacy
``transformers.AdamW`` their official code steps with, and clip the gradient norm at 1.0 as it does.

DefSent+-style runs (one epoch, no warmup, clip 1.0, legacy AdamW, no dev selection, several
rounds restarting from the original checkpoint): ``TrainConfig(epochs=1, warmup_ratio=0,
grad_clip=1.0, optimizer="adamw-legacy", adam_eps=1e-6, eval_every=None, eval_at_start=False)``,
and one :func:`train` call per round with a fresh :func:`load_base` model and its own ``out`` folder.
"""

from benchharness.core.seeding import seed_everything
from benchharness.encoders.methods.base_model import base_folder, load_base
from benchharness.encoders.methods.loop import DevScore, TrainResult, linear_schedule, make_optimizer, train
from benchharness.encoders.methods.method import LossOutput, TrainingMethod
from benchharness.encoders.methods.optim import LegacyAdamW
from benchharness.encoders.methods.train_config import (
    TrainConfig,
    add_training_arguments,
    config_from_options,
    resolve_options,
)

__all__ = [
    "DevScore",
    "LegacyAdamW",
    "LossOutput",
    "TrainConfig",
    "TrainResult",
    "TrainingMethod",
    "add_training_arguments",
    "base_folder",
    "config_from_options",
    "linear_schedule",
    "load_base",
    "make_optimizer",
    "resolve_options",
    "seed_everything",
    "train",
]
