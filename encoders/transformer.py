"""What the ``hf:`` and ``st:`` encoders share: how they pick a device, precision and backend, and
the inference engine they run through.

Both families load lazily (listing, fingerprinting or a warm rerun loads no model), so the device
is picked when first asked, and the mask token a RepAL chain needs is read from the tokenizer
files while the tokenizer is not loaded. What differs between them (which object holds the model
and tokenizer, where the tokenizer files are, how vectors are pooled) stays in the families.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchharness.core.devices import DeviceChoice, check_precision, checked_batch_size
from benchharness.core.encoder import Encoder
from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import DEFAULT, Role
from benchharness.encoders.backends import DEFAULT_BACKEND, REFERENCE, check_backend
from benchharness.encoders.inference import TOKENS_PER_SENTENCE, TransformerEngine

if TYPE_CHECKING:
    import numpy as np
    import torch

logger = logging.getLogger(__name__)


class TransformerEncoder(Encoder):
    """A transformer encoder run by ``benchharness.encoders.inference`` unless ``backend=reference``.

    Subclasses say where the tokenizer files are and which object holds the tokenizer
    (``_declared_mask_token``, ``_tokenizer_if_loaded``, ``_load_tokenizer``), and build their
    engine with ``engine``.
    """

    #: device types on which the reference path applies reduced precision itself (autocast)
    reference_autocast: tuple[str, ...] = ()
    #: a prompt that leaves a sentence fewer tokens than this within the token limit is warned about
    MIN_SENTENCE_TOKENS = 8

    def __init__(self, name: str, batch_size: int, device: str | None, precision: str, backend: str | None) -> None:
        super().__init__(name)
        self.batch_size = checked_batch_size(name, batch_size)
        self._device = DeviceChoice(device)
        # fp32 needs no device; reduced precision is checked against it now (that imports torch)
        self.precision = "fp32" if precision == "fp32" else check_precision(precision, self.device)
        self.backend = check_backend(backend or DEFAULT_BACKEND)
        if self.backend == REFERENCE and self.precision != "fp32" and self.device.type not in self.reference_autocast:
            raise InvalidInputError(
                f"precision={self.precision} on {self.device} runs through the inference engine: add backend=eager"
            )
        self._engine: TransformerEngine | None = None
        self._prompts_checked: set[str] = set()
        #: why the reference path ran although the engine was asked for (a model the engine cannot run)
        self._engine_refusal: str | None = None

    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        prompt = self.prompts.for_role(role)
        if prompt and sentences and prompt not in self._prompts_checked:
            self._prompts_checked.add(prompt)
            self._check_room(prompt)
        return super().encode_role(sentences, role)

    def _token_limit(self) -> int | None:
        """The most tokens a sentence (prompt included) keeps; None where the family does not say."""
        return None

    def _check_room(self, prompt: str) -> None:
        """Warn, once per prompt, when the prompt leaves a sentence fewer than ``MIN_SENTENCE_TOKENS``
        tokens: what is cut is the sentence, so every sentence would encode alike or nearly."""
        limit = self._token_limit()
        if limit is None:
            return
        used = len(self._load_tokenizer()(prompt, add_special_tokens=False)["input_ids"])
        room = limit - used - 2  # [CLS] and [SEP], or their like
        if room < self.MIN_SENTENCE_TOKENS:
            logger.warning(
                "encoder %s: the prompt %r takes %d of the %d tokens a sentence keeps (max_length): %s; "
                "shorten the prompt or raise max_length",
                self.name,
                prompt if len(prompt) <= 60 else prompt[:60] + "...",
                used,
                limit,
                "nothing of a sentence is left" if room <= 0 else f"a sentence keeps {room}",
            )

    @property
    def device(self) -> torch.device:
        """The device the model runs on, picked when first asked (a cached run never asks)."""
        return self._device.get()

    def engine(self, model: torch.nn.Module, tokenizer: Any, max_length: int | None) -> TransformerEngine:
        """The inference engine for this model, built at first use (``batch_size`` x 64-token batches)."""
        if self._engine is None:
            self._engine = TransformerEngine(
                model,
                tokenizer,
                max_length,
                self.device,
                self.precision,
                self.backend,
                self.batch_size * TOKENS_PER_SENTENCE,
                first_token=self._reads_first_token_only(),
            )
        return self._engine

    def _reads_first_token_only(self) -> bool:
        """Whether the pooling reads the last layer at the first position only (then the engine
        computes no more of that layer where the model allows it)."""
        return False

    @abstractmethod
    def _declared_mask_token(self) -> str | None:
        """The mask token the tokenizer files declare, read without loading the tokenizer."""

    @abstractmethod
    def _tokenizer_if_loaded(self) -> Any | None:
        """The tokenizer if it is loaded already, else None."""

    @abstractmethod
    def _load_tokenizer(self) -> Any:
        """The tokenizer, loading it (and whatever holds it) if needed."""

    @property
    def mask_token(self) -> str | None:
        # from the tokenizer files when they declare it: a warm rerun of a RepAL chain loads nothing
        if self._tokenizer_if_loaded() is None:
            declared = self._declared_mask_token()
            if declared is not None:
                return declared
        return self._load_tokenizer().mask_token

    def _run_metadata(self) -> dict[str, Any]:
        """How the vectors were computed: batch size, the device that ran (None when every vector
        came from the cache) and the backend that ran (the reference path, with the engine's reason,
        when the engine could not run the model)."""
        if self._engine_refusal is None:
            return {"batch_size": self.batch_size, "device": self._device.chosen, "backend": self.backend}
        return {
            "batch_size": self.batch_size,
            "device": self._device.chosen,
            "backend": REFERENCE,
            "engine_unsupported": self._engine_refusal,
        }
