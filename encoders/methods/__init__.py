"""Training methods, discovered by ``benchharness train <method>``.

``METHODS`` maps a method name to its command module (``encoders.methods.commands``), which
exposes ``HELP: str``, ``add_arguments(parser)`` and ``main(args, dev=None) -> int``; ``dev`` is
the factory of the dev evaluation, which the core passes in (``benchharness.training_cli``) since
encoders know no evaluation task. The methods' models and losses are ``consert``, ``simcse``,
``paser`` and ``defsent_plus`` here, on the shared loop described in ``training.py``.
"""

from __future__ import annotations

from types import ModuleType

from encoders.methods.commands import consert, defsent_plus, paser, simcse

METHODS: dict[str, ModuleType] = {
    "consert": consert,
    "simcse": simcse,
    "paser": paser,
    "defsent-plus": defsent_plus,
}
