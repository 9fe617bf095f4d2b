"""The one contract every encoder honours, whatever produces its vectors.

Tasks never see an encoder and encoders never see a task: the runner hands an encoder a list of
unique sentences and gets back one float32 row per sentence, in order. Everything that determines
those rows goes into ``identity_info`` so that stored results and cached embeddings can be tied to
exactly the model that produced them.

A task may ask for a sentence as a query or as a document (``benchharness.core.prompts.Role``). An
encoder answers through ``encode_role``, which by default puts the role's prompt in front of each
sentence and calls ``encode``: a family that only implements ``encode`` thereby supports prompts,
and an encoder without prompts is symmetric (one vector per sentence, whatever the role).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from benchharness.core.prompts import DEFAULT, NO_PROMPTS, Prompts, Role


def stable_hash(obj: Any) -> str:
    """sha256 of a JSON rendering with sorted keys: the same settings give the same fingerprint."""
    blob = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


#: fingerprints computed in the current evaluation call, by the object they fingerprint; None outside one
_SCOPE: contextvars.ContextVar[dict[int, tuple[Any, str]] | None] = contextvars.ContextVar(
    "benchharness_identity_scope", default=None
)


@contextlib.contextmanager
def identity_scope() -> Iterator[None]:
    """One evaluation call: within it, an expensive fingerprint (every weight of a model in memory)
    is computed once however often the run, the cache and the post-processors ask for an identity.
    Outside a scope nothing is remembered, so weights changed between calls are seen."""
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def scoped_fingerprint(obj: Any, compute: Callable[[], str]) -> str:
    """``compute()``, remembered for ``obj`` until the current ``identity_scope`` ends."""
    memo = _SCOPE.get()
    if memo is None:
        return compute()
    held = memo.get(id(obj))
    if held is None or held[0] is not obj:  # the object is kept, so its id cannot be reused meanwhile
        held = memo[id(obj)] = (obj, compute())
    return held[1]


class Encoder(ABC):
    """A sentence encoder: ``encode(sentences) -> float32 array (n, d)``.

    Subclasses implement ``encode`` (on the whole list: batching is theirs, see
    ``length_sorted_batches``) and ``identity_info``. ``name`` is the user-facing name (resolver
    name or spec); ``metadata`` says how the vectors are meant to be used (pooling, similarity, base
    model, training data) and is stored beside every result.
    """

    #: similarity function the vectors are meant for; every current task uses cosine.
    similarity: str = "cosine"
    #: how a trained encoder was made (its run manifest less the encoder spec), set by the resolver.
    #: Run folders are not kept with the results, so each result carries its recipe; it is
    #: descriptive only and stays out of ``identity`` (the weights hash already pins the model).
    provenance: dict[str, Any] | None = None
    #: the text put in front of a sentence, by role (set from the spec, or the model's own config)
    prompts: Prompts = NO_PROMPTS
    #: whether the vectors depend on the role beyond the prompts (vectors computed elsewhere per
    #: role, a callable that takes the role): such an encoder is asked for every role separately
    role_aware: bool = False
    #: what the model gives for a text (``benchharness.core.kinds``): "dense", one vector per text,
    #: for every encoder that implements ``encode``; the other kinds subclass ``core.kind_models.KindModel``
    model_kind: str = "dense"

    def __init__(self, name: str) -> None:
        self.name = name

    # read-only properties, so that a subclass may answer from its state (a callable's identity=)
    @property
    def pinned(self) -> bool:
        """Whether ``identity`` ties the outputs to a model; an unpinned encoder (a plain callable
        given no identity) is evaluated but never cached or stored."""
        return True

    @property
    def calibrated_per_task(self) -> bool:
        """Whether this is a last stage whose codes are calibrated on each task's own vectors
        (``+quantize`` to int8 or uint8): a run encodes its ``wrapped`` encoder's vectors once for
        all tasks, and its ``for_task`` turns the vectors of each task into that task's codes."""
        return False

    @property
    def cacheable(self) -> bool:
        """Whether the embedding cache should hold its vectors: not for vectors read from files
        (``vectors:``), which are already on disk and cheaper to read than the cache."""
        return True

    @abstractmethod
    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        """Return one float32 row per sentence, in the order given (a progress bar, if any, follows
        ``benchharness.core.progress.shown()``)."""

    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        """The vectors of ``sentences`` encoded for ``role``: the role's prompt in front of each
        sentence, as sentence-transformers applies a prompt. Role-aware encoders override this."""
        prompt = self.prompts.for_role(role)
        return self.encode([prompt + s for s in sentences] if prompt else sentences)

    def vector_key(self, role: Role) -> str:
        """What distinguishes this encoder's vectors for ``role``: roles with one key get identical
        vectors, so a sentence asked for by several of them is encoded once. The empty key is the
        plain ``encode`` of every symmetric encoder."""
        prompt = self.prompts.for_role(role)
        return f"{role}\x1f{prompt}" if self.role_aware else prompt

    def bytes_per_vector(self, width: int) -> float:
        """The storage one of its vectors takes, rows of ``width`` values: float32 unless a stage
        says otherwise (a quantized code); what a size-against-quality curve is drawn against."""
        return 4.0 * width

    @abstractmethod
    def identity_info(self) -> dict[str, Any]:
        """Everything that determines the outputs: weights fingerprint, pooling, wrapper parameters."""

    def identity_record(self) -> dict[str, Any]:
        """``identity_info`` with the prompts, which change the outputs as much as the weights do."""
        info = self.identity_info()
        prompts = self.prompts.record()
        return {**info, "prompts": prompts} if prompts else info

    @property
    def identity(self) -> str:
        """Short fingerprint of ``identity_record``; keys caches and ties results to a model."""
        return stable_hash(self.identity_record())[:16]

    @property
    def metadata(self) -> dict[str, Any]:
        """Descriptive facts stored with results; subclasses extend it."""
        facts: dict[str, Any] = {"class": type(self).__name__, "similarity": self.similarity}
        if not self.prompts.empty:
            facts["prompts"] = self.prompts.record()
        if self.provenance is not None:
            facts["training"] = self.provenance
        return facts

    @property
    def mask_token(self) -> str | None:
        """The tokenizer's mask token, for post-processors that mask words (RepAL); None if absent."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class WrappingEncoder(Encoder):
    """An encoder around another one (the embedding cache, a post-processor). Roles, prompts and the
    mask token are the wrapped encoder's, which applies the prompts itself; ``encode`` is the
    default role's vectors, and subclasses implement ``encode_role``."""

    @property
    @abstractmethod
    def wrapped(self) -> Encoder:
        """The encoder this one is built around."""

    @property
    def prompts(self) -> Prompts:  # type: ignore[override]
        return self.wrapped.prompts

    @property
    def role_aware(self) -> bool:  # type: ignore[override]
        return self.wrapped.role_aware

    @property
    def model_kind(self) -> str:  # type: ignore[override]
        return self.wrapped.model_kind

    def vector_key(self, role: Role) -> str:
        return self.wrapped.vector_key(role)

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        return self.encode_role(sentences, DEFAULT)

    @abstractmethod
    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray: ...

    @property
    def mask_token(self) -> str | None:
        return self.wrapped.mask_token


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """Yield index batches over items sorted longest-first.

    Sorting by length keeps padding (the dominant waste of transformer encoding) small; longest
    first makes an out-of-memory error surface in the first batch rather than the last.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]
