"""The ``python`` family: an encoder defined in any importable module, named ``module:attribute``.

``python:mypkg.models:MyEncoder`` on the command line, or ``spec = "mypkg.models:MyEncoder"`` in
``benchharness.toml``: the attribute is an :class:`~benchharness.core.encoder.Encoder` instance, or
a callable (an ``Encoder`` subclass, a factory) that takes the encoder's ``name`` and returns one.
The encoder's own ``identity_info`` pins its outputs; the target is recorded beside it.
"""

from __future__ import annotations

from typing import Any

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import load_object
from benchharness.core.specs import MODULE_ATTRIBUTE, BuildContext, Family, Params


def load_target(target: str) -> Any:
    if not MODULE_ATTRIBUTE.fullmatch(target):
        raise InvalidInputError(f"{target!r} is not module:attribute (e.g. mypkg.models:MyEncoder)")
    try:
        return load_object(target)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(f"cannot load encoder {target!r}: {exc}") from None


def build(name: str, spec: Params, context: BuildContext) -> Encoder:
    target = spec["object"]
    obj = load_target(target)
    encoder = obj if isinstance(obj, Encoder) else obj(name) if callable(obj) else None
    if not isinstance(encoder, Encoder):
        raise InvalidInputError(
            f"{target} is neither an Encoder nor a callable that returns one for a name (got {type(obj).__name__})"
        )
    return encoder


#: runs code: named by the user's own config or command line, never by a run manifest (data from elsewhere)
FAMILY = Family.of(
    "python",
    build,
    target="object",
    accepts=(),
    usage="python:<module:attribute>",
    check=lambda spec: load_target(spec["object"]),
)
