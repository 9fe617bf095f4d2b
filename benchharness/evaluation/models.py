"""Whatever a researcher holds, as an :class:`~benchharness.core.encoder.Encoder`.

``as_encoder`` accepts a resolver name or spec (``"minilm-l6+whitening"``), an ``Encoder``, a
``SentenceTransformer``, a sentence-transformers ``CrossEncoder``, ``SparseEncoder`` or
``MultiVectorEncoder`` (each loaded as its own kind), a transformers model (with ``tokenizer=`` and
``pooling=``), any callable from a list of sentences to vectors, or any callable from text pairs to
scores marked as such (``PairScorer(fn)``); a callable is pinned by ``identity=``, else unpinned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import load_object
from benchharness.evaluation.resolver import Resolver

#: what ``evaluate`` and the evaluators accept as a model
ModelLike = Any

#: sentence-transformers' model classes of the kinds other than dense, and the function that wraps an
#: object of each, ``module:function`` (imported when one is met); each takes (model, name,
#: batch_size=..., device=...)
KIND_OBJECTS = {
    "CrossEncoder": "benchharness.encoders.st_cross_encoder:from_object",
    "SparseEncoder": "benchharness.encoders.st_sparse:from_object",
    "MultiVectorEncoder": "benchharness.encoders.st_multi_vector:from_object",
}


@dataclass(frozen=True)
class PairScorer:
    """Marks ``fn`` as a cross-encoder of one's own: a function from a list of (query, document)
    text pairs to one score per pair (numpy, torch or a list), higher for a better match. It runs
    the tasks that score given pairs (STS, pair files, reranking), batched and cached as a
    ``CrossEncoder`` is; ``identity=`` pins it as it pins any callable::

        benchharness.evaluate(benchharness.PairScorer(my_reranker), "AskUbuntu", identity="my-reranker-v1")
    """

    fn: Callable[[list[tuple[str, str]]], Any]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise InvalidInputError(f"PairScorer({self.fn!r}): give a function from a list of text pairs to scores")


_ST = "sentence_transformers"


def _st_class(model: Any, names: Any) -> str | None:
    """The first sentence-transformers model class among ``names`` that ``model`` is an instance of."""
    return next(
        (
            c.__name__
            for c in type(model).__mro__
            if c.__name__ in names and c.__module__.startswith("sentence_transformers")
        ),
        None,
    )


def _is_sentence_transformer(model: Any) -> bool:
    return _st_class(model, ("SentenceTransformer",)) is not None


def _is_st_model(model: Any) -> bool:
    """A sentence-transformers model object of any kind: its identity is its weights'."""
    return _is_sentence_transformer(model) or _st_class(model, KIND_OBJECTS) is not None


def is_transformers_model(model: Any) -> bool:
    return any(c.__name__ == "PreTrainedModel" and c.__module__.startswith("transformers") for c in type(model).__mro__)


def default_name(model: ModelLike) -> str:
    """The name results carry when the caller gives none."""
    if isinstance(model, str):
        return model
    if isinstance(model, Encoder):
        return model.name
    if _is_st_model(model):
        first = model[0] if len(model) else None
        config = getattr(getattr(first, "auto_model", None), "config", None)
        return f"st-object:{getattr(config, '_name_or_path', '') or type(model).__name__}"
    if is_transformers_model(model):
        return f"hf-object:{getattr(model.config, '_name_or_path', '') or type(model).__name__}"
    fn = model.fn if isinstance(model, PairScorer) else model
    return f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"


def check_keywords(
    model: ModelLike, *, name: str | None, tokenizer: Any, pooling: str | None, identity: str | None
) -> None:
    """Refuse, in one line, a keyword of ``as_encoder`` that is malformed or that ``model`` would
    ignore: the caller meant something by it."""
    for key, value in (("name", name), ("identity", identity), ("pooling", pooling)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInputError(f"{key}={value!r}: must be a non-empty string")
    kind = type(model).__name__
    if name is not None and isinstance(model, (str, Encoder)):
        raise InvalidInputError(
            f"name={name!r} names a model object; a name, a spec or an Encoder ({model!r}) is named by itself"
        )
    if (tokenizer is not None or pooling is not None) and not is_transformers_model(model):
        raise InvalidInputError(
            f"tokenizer= and pooling= go with a transformers model, not a {kind}; for a model "
            "by name, use the spec hf:<id or folder>?pooling=<pooling>"
        )
    if identity is not None and (
        isinstance(model, (str, Encoder)) or is_transformers_model(model) or _is_st_model(model)
    ):
        raise InvalidInputError(
            f"identity= pins a plain callable; a {kind} has an identity of its own (a model "
            "object's is the fingerprint of its weights)"
        )


def check_call(
    models: list[ModelLike], *, name: str | None, tokenizer: Any, pooling: str | None, identity: str | None
) -> None:
    """The model keywords of one ``evaluate`` call, checked before any model loads: ``name`` and
    ``identity`` belong to one model, ``tokenizer`` and ``pooling`` to its transformers models."""
    if len(models) == 1:
        check_keywords(models[0], name=name, tokenizer=tokenizer, pooling=pooling, identity=identity)
        return
    for key, value in (("name", name), ("identity", identity)):
        if value is not None:
            raise InvalidInputError(
                f"{key}= belongs to one model, and {len(models)} are given; give each its own "
                f"with benchharness.as_encoder(model, {key}=...)"
            )
    if (tokenizer is not None or pooling is not None) and not any(is_transformers_model(m) for m in models):
        raise InvalidInputError("tokenizer= and pooling= go with a transformers model, and none is given")


def as_encoder(
    model: ModelLike,
    *,
    name: str | None = None,
    tokenizer: Any = None,
    pooling: str | None = None,
    identity: str | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    resolver: Resolver | None = None,
    **options: Any,
) -> Encoder:
    """The encoder ``model`` stands for; ``options`` go to the in-memory encoder (``max_length``,
    ``normalize``, ``precision``...). A keyword that does not apply to ``model`` is refused, not
    ignored: the caller meant something by it."""
    check_keywords(model, name=name, tokenizer=tokenizer, pooling=pooling, identity=identity)
    name = name or default_name(model)
    sizes: dict[str, Any] = {} if batch_size is None else {"batch_size": batch_size}  # else the encoder's default
    if isinstance(model, str):
        if resolver is None:
            from benchharness.evaluation.run_settings import RunSettings

            resolver = Resolver(settings=RunSettings(device=device, batch_size=batch_size))
        resolver.check(model)
        return resolver.get(model)
    if isinstance(model, Encoder):
        return model
    kind_class = _st_class(model, KIND_OBJECTS)
    if kind_class is not None:  # before the dense check: a kind's object is never taken for vectors
        wrap: Callable[..., Encoder] = load_object(KIND_OBJECTS[kind_class])
        return wrap(model, name, **sizes, device=device)
    if isinstance(model, PairScorer):
        from benchharness.encoders.in_memory import PairCallable

        return PairCallable(name, model.fn, identity=identity, **sizes)
    if _is_sentence_transformer(model):
        from benchharness.encoders.in_memory import SentenceTransformerObjectEncoder

        return SentenceTransformerObjectEncoder(name, model, device=device, **sizes, **options)
    if is_transformers_model(model):
        if tokenizer is None or pooling is None:
            raise InvalidInputError(
                "a transformers model needs tokenizer= and pooling= (cls, cls_before_pooler, "
                "avg, avg_top2, avg_first_last, max, prompt)"
            )
        from benchharness.encoders.in_memory import TransformersModelEncoder

        return TransformersModelEncoder(name, model, tokenizer, pooling, device=device, **sizes, **options)
    if callable(model):
        from benchharness.encoders.in_memory import CallableEncoder

        fn: Callable[[list[str]], Any] = model
        return CallableEncoder(name, fn, identity=identity, **sizes)
    raise InvalidInputError(
        f"cannot evaluate a {type(model).__name__}: pass a name or spec, an Encoder, a "
        "SentenceTransformer (or a CrossEncoder, SparseEncoder, MultiVectorEncoder), a transformers model with "
        "tokenizer= and pooling=, a callable from a list of sentences to vectors, or PairScorer(a callable from "
        "text pairs to scores)"
    )
