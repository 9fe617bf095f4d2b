"""Encoders around objects a user already holds in memory: a ``SentenceTransformer``, a transformers
model with its tokenizer and a pooling name, any callable from sentences to vectors, or any callable
from text pairs to scores (a cross-encoder of the user's).

They encode exactly as the ``st:`` and ``hf:`` families do (the same engine, modules and pooling),
so an in-memory model scores what the same model loaded by name scores. Their identity pins the
weights themselves (every parameter and buffer, hashed as they are now) and the pooling, so one
more training step gives another identity, and cached vectors or stored results are never served
for other weights. A plain callable has no weights to hash: it is pinned only by an ``identity``
its owner gives, and without one it is *unpinned* (``pinned`` False), which the harness never
caches or stores.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchharness.core.devices import checked_batch_size
from benchharness.core.encoder import Encoder, length_sorted_batches, scoped_fingerprint
from benchharness.core.errors import InvalidInputError
from benchharness.core.kind_models import PairModel
from benchharness.core.progress import shown
from benchharness.encoders import hub
from benchharness.encoders.huggingface import HFEncoder
from benchharness.encoders.pooling import POOLINGS, PROMPT_TEMPLATE
from benchharness.encoders.sbert import SentenceTransformerEncoder, prompts_by_role
from benchharness.encoders.st_folder import object_module_configs, unused_poolers
from benchharness.encoders.transformer import TransformerEncoder
from benchharness.scoring.pair_view import as_scores, returned_array

if TYPE_CHECKING:
    import torch


def module_fingerprint(module: torch.nn.Module, unused: tuple[str, ...] = ()) -> str:
    """sha256 over every parameter and buffer of ``module`` (name, dtype, shape and bytes), in name
    order, but those under the prefixes in ``unused`` (weights no output depends on, such as a
    pooler the encoder never calls, which a checkpoint without one leaves randomly initialised, so
    that two loads of one checkpoint would hash apart): equal weights give equal fingerprints on
    any device, any change gives another. Computed once per evaluation call (``identity_scope``),
    however often an identity is asked for."""
    return scoped_fingerprint(module, lambda: _weights_sha256(module, unused))


def _weights_sha256(module: torch.nn.Module, unused: tuple[str, ...] = ()) -> str:
    import torch

    digest = hashlib.sha256()
    tensors: dict[str, torch.Tensor] = dict(module.named_parameters())
    tensors.update(module.named_buffers())
    for name in sorted(n for n in tensors if not (unused and n.startswith(unused))):
        tensor = tensors[name].detach().to("cpu").contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """The model in eval mode (no dropout) while it encodes, then back in the mode it was in: a
    model being trained is evaluated in place."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _name_or_path(model: Any) -> str | None:
    """Where a model came from, when it says (descriptive only: the weights are hashed)."""
    config = getattr(model, "config", None)
    return getattr(config, "_name_or_path", None) or getattr(model, "name_or_path", None) or None


@dataclass(frozen=True)
class HeldSource(hub.ModelSource):
    """Where a model in memory came from (a hub id or a folder, as its config says), with the
    weights it holds now: the fingerprint is of the module itself, never of files under that name.
    A hub id is no folder, and a folder's files need not be the weights in memory (a model trained
    since it was loaded)."""

    module: Any = field(default=None, compare=False, repr=False)
    #: prefixes of the weights no output depends on (``module_fingerprint``)
    unused: tuple[str, ...] = field(default=(), compare=False)

    @property
    def weights_sha256(self) -> str:
        return module_fingerprint(self.module, self.unused)

    @classmethod
    def of(cls, module: Any, fallback: str, described_by: Any = None, unused: tuple[str, ...] = ()) -> HeldSource:
        """``module``'s weights, named as ``described_by`` (default: ``module``) says it was loaded."""
        origin = _name_or_path(module if described_by is None else described_by) or fallback
        return cls(origin, Path(origin), None, module, unused)


class _HeldModel:
    """What the in-memory encoders share: the tokenizer is loaded already, and the model encodes
    in eval mode and is handed back in the mode it was in."""

    _model: Any

    def _declared_mask_token(self) -> str | None:
        return None

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        with evaluating(self._model):
            return super().encode(sentences)  # type: ignore[misc]


class SentenceTransformerObjectEncoder(_HeldModel, SentenceTransformerEncoder):
    """A loaded ``SentenceTransformer``, run by its own modules like ``st:`` (the engine where the
    model's shape allows, else ``SentenceTransformer.encode``)."""

    def __init__(
        self,
        name: str,
        model: Any,
        batch_size: int = 64,
        device: str | None = None,
        precision: str = "fp32",
        backend: str | None = None,
    ) -> None:
        TransformerEncoder.__init__(self, name, batch_size, device or str(model.device), precision, backend)
        self._model = model.to(self.device)
        self.source = HeldSource.of(
            self._model, name, described_by=model[0].auto_model, unused=unused_poolers(self._model)
        )
        self.prompts = prompts_by_role(
            getattr(model, "prompts", None) or {},
            getattr(model, "default_prompt_name", None),
            any(getattr(m, "include_prompt", True) is False for m in model),
            name,
        )

    def _module_configs(self) -> dict[str, Any]:
        return object_module_configs(self._model)

    def identity_info(self) -> dict[str, Any]:
        return {
            "family": "sentence-transformers-object",
            "model": self.source.name,
            "weights_sha256": self.source.weights_sha256,
            "modules": self._module_configs(),
            **({"precision": self.precision} if self.precision != "fp32" else {}),
        }


class TransformersModelEncoder(_HeldModel, HFEncoder):
    """A loaded transformers model and tokenizer with one of the ``hf:`` poolings, encoded exactly
    as ``hf:<model>?pooling=...`` encodes."""

    def __init__(
        self,
        name: str,
        model: Any,
        tokenizer: Any,
        pooling: str = "avg",
        first_layer: int = 1,
        max_length: int = 512,
        batch_size: int = 64,
        device: str | None = None,
        precision: str = "fp32",
        normalize: bool = False,
        template: str = PROMPT_TEMPLATE,
        backend: str | None = None,
    ) -> None:
        if pooling not in POOLINGS:
            raise InvalidInputError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        if pooling == "cls" and getattr(model, "pooler", None) is None:
            raise InvalidInputError(
                f"pooling 'cls' needs the model's pooler, and {type(model).__name__} has none: use cls_before_pooler"
            )
        TransformerEncoder.__init__(self, name, batch_size, device or str(model.device), precision, backend)
        # only the 'cls' pooling reads the pooler's output
        self.source = HeldSource.of(model, name, unused=() if pooling == "cls" else ("pooler.",))
        self.tokenizer_source = None
        self.pooling, self.first_layer, self.max_length = pooling, int(first_layer), int(max_length)
        self.normalize, self.template = bool(normalize), template
        self._model = model.to(self.device)
        self._tokenizer = tokenizer

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def identity_info(self) -> dict[str, Any]:
        info = super().identity_info()  # weights_sha256: the module's own (``HeldSource``)
        info.update(
            {
                "family": "transformers-object",
                "revision": None,
                "tokenizer": {"class": type(self.tokenizer).__name__, "vocabulary_size": len(self.tokenizer)},
            }
        )
        return info


class _GivenIdentity:
    """What a plain function shares as a model, whatever it returns: ``identity`` is the owner's
    promise that the outputs depend on nothing else (a function cannot be hashed like weights). The
    identity record also holds the function's qualified name, so two functions of different names
    never share cached outputs or stored results under one identity string; a function edited under
    the same name needs a new ``identity``. Without one it is unpinned: never cached nor stored."""

    fn: Callable[..., Any]
    given_identity: str | None
    #: the ``family`` its identity records
    family: str

    @property
    def pinned(self) -> bool:
        """Whether the outputs are tied to a stated identity (else never cached nor stored)."""
        return self.given_identity is not None

    def identity_info(self) -> dict[str, Any]:
        if self.given_identity is None:
            return {"family": self.family, "unpinned": f"{type(self.fn).__qualname__}@{id(self.fn):x}"}
        return {"family": self.family, "identity": self.given_identity, "callable": callable_name(self.fn)}

    @property
    def metadata(self) -> dict[str, Any]:
        return {**super().metadata, "callable": callable_name(self.fn), "pinned": self.pinned}  # type: ignore[misc]


class CallableEncoder(_GivenIdentity, Encoder):
    """Any function from a list of sentences to vectors (numpy, torch or nested lists), called on
    batches of ``batch_size`` sentences in the order given; pinned by ``identity``."""

    family = "callable"

    def __init__(
        self, name: str, fn: Callable[[list[str]], Any], batch_size: int = 64, identity: str | None = None
    ) -> None:
        super().__init__(name)
        self.fn, self.batch_size, self.given_identity = fn, checked_batch_size(name, batch_size), identity
        #: the width of the vectors returned so far (every batch must return the same)
        self._width: int | None = None

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        from tqdm.auto import tqdm

        rows = []
        starts = range(0, len(sentences), self.batch_size)
        for number, start in enumerate(tqdm(starts, desc=f"encode {self.name}", disable=not shown(), unit="batch"), 1):
            batch = list(sentences[start : start + self.batch_size])
            vectors = as_vectors(self.fn(batch), len(batch), self.name)
            if self._width is None:
                self._width = vectors.shape[1]
            elif vectors.shape[1] != self._width:
                raise InvalidInputError(
                    f"encoder {self.name!r} returned {vectors.shape[1]}-dimensional vectors for batch {number} "
                    f"(sentences {start + 1}-{start + len(batch)}) but {self._width}-dimensional ones before; "
                    "every batch must return vectors of one width"
                )
            rows.append(vectors)
        return np.concatenate(rows) if rows else np.zeros((0, self._width or 0), dtype=np.float32)


class PairCallable(_GivenIdentity, PairModel):
    """Any function from a list of (left, right) text pairs to one score per pair (numpy, torch or a
    list): a cross-encoder of the user's (``benchharness.PairScorer``). It is called on batches of
    ``batch_size`` pairs sorted by length, longest first, as ``CrossEncoder.predict`` batches them,
    and the scores come back in the order given; pinned by ``identity``."""

    family = "pair-callable"

    def __init__(
        self,
        name: str,
        fn: Callable[[list[tuple[str, str]]], Any],
        batch_size: int = 64,
        identity: str | None = None,
    ) -> None:
        super().__init__(name)
        self.fn, self.batch_size, self.given_identity = fn, checked_batch_size(name, batch_size), identity

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        scores = np.zeros(len(pairs))
        for batch in length_sorted_batches([len(a) + len(b) for a, b in pairs], self.batch_size):
            chunk = [(pairs[i][0], pairs[i][1]) for i in batch]
            scores[batch] = as_scores(self.fn(chunk), len(chunk), f"pair scorer {self.name!r}")
        return scores


def callable_name(fn: Callable[..., Any]) -> str:
    """A function's qualified name (a callable object's: its class's)."""
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def as_vectors(value: Any, n: int, name: str) -> np.ndarray:
    """A callable's output as a float32 (n, d) array: numpy arrays, torch tensors (any device or
    dtype) and nested lists are accepted; anything else is refused with what came back."""
    array = returned_array(value, np.float32, f"encoder {name!r}", "vectors")
    if array.ndim != 2 or len(array) != n or not array.shape[1]:
        raise InvalidInputError(
            f"encoder {name!r} returned an array of shape {array.shape} for {n} sentences; "
            "expected one row (of one value or more) per sentence"
        )
    return array
