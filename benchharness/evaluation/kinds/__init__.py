"""The kinds of model a run can score (``benchharness.core.kinds``), as plugins of the
``model_kinds`` group: the dense kind, whose vectors come from the runner's shared pass, and the
kinds whose views score as sentence-transformers' own evaluators do (sparse, multi-vector,
cross-encoder). ``kind_of`` is the one place the runner asks which kind a model is."""

from __future__ import annotations

import difflib
from typing import Any

from benchharness.core.encoder import Encoder, WrappingEncoder
from benchharness.core.kinds import KindMismatchError, ModelKind
from benchharness.core.plugins import PLUGINS


def model_kind(name: str) -> ModelKind:
    """The installed kind called ``name``; an unknown one in one line, with the close names."""
    try:
        kind: ModelKind = PLUGINS.get("model_kinds", name)
    except KeyError:
        known = PLUGINS.names("model_kinds")
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KindMismatchError(f"unknown model kind {name!r}.{hint} Installed: {', '.join(known)}") from None
    return kind


def kind_of(encoder: Encoder) -> ModelKind:
    """The kind of ``encoder`` (``Encoder.model_kind``; a wrapper's is its base's)."""
    return model_kind(encoder.model_kind)


def held_model(encoder: Encoder, cls: type, kind: ModelKind) -> Any:
    """The model of ``kind`` under ``encoder``: the run hands it wrapped (in the embedding cache,
    whose rows are the dense kind's; a kind's view caches its own outputs)."""
    model = encoder
    while isinstance(model, WrappingEncoder):
        model = model.wrapped
    if not isinstance(model, cls):
        raise KindMismatchError(f"{encoder.name} is {type(model).__name__}, not {kind.title}")
    return model
