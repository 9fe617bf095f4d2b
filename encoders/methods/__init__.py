"""Training methods, discovered by ``benchharness train <method>``.

``METHODS`` maps a method name to a module exposing ``HELP: str``,
``add_arguments(parser)`` and ``main(args) -> int``. Every method builds on the shared loop of
``encoders.methods.training`` (see its docstring for the API: ``TrainingMethod``, ``TrainConfig``,
``train``, ``add_training_arguments``).
"""

from __future__ import annotations

from types import ModuleType

from encoders.methods import consert, defsent_plus, paser, simcse

METHODS: dict[str, ModuleType] = {
    "consert": consert,
    "simcse": simcse,
    "paser": paser,
    "defsent-plus": defsent_plus,
}
