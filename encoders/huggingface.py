"""Any Hugging Face transformer as a sentence encoder, with the pooling variants of the field.

The ``hf`` family: ``hf:<hub id or folder>?pooling=...&max_length=...``. torch and transformers
are imported where a model is loaded or run, so that loading the family plugin costs nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from benchharness.core.devices import autocast
from benchharness.core.encoder import length_sorted_batches
from benchharness.core.errors import InvalidInputError
from benchharness.core.progress import shown
from benchharness.core.settings import HubSettings
from benchharness.core.specs import BuildContext, EncoderSpec, Family, Params
from benchharness.encoders import hub as hub_files
from benchharness.encoders.backends import BACKENDS, REFERENCE, changes_outputs
from benchharness.encoders.checkpoint import load_complete, refuse_missing_tokenizer, refuse_random_pooler
from benchharness.encoders.first_token import FIRST_TOKEN_POOLINGS
from benchharness.encoders.pooling import POOLINGS, PROMPT_TEMPLATE, needs_hidden_states, pool
from benchharness.encoders.tokenizer_files import declared_token
from benchharness.encoders.transformer import TransformerEncoder

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


class HFEncoder(TransformerEncoder):
    """A transformers ``AutoModel`` plus a pooling rule.

    By default (``backend=eager``; also ``compile``, ``onnx``) sentences run through
    ``benchharness.encoders.inference`` (batches of equal token length, ``batch_size`` x 64 tokens each, no
    padding); ``backend=reference`` forms padded batches of character-length-sorted sentences, the
    path the stored scores were first computed with (vectors within ~1e-7 of the engine's).
    Outputs are returned in input order. ``tokenizer`` names another model (hub id or folder) whose
    tokenizer to use, for checkpoints that ship weights without one (DefSent+ uses its base model's).
    """

    reference_autocast = ("cuda",)  # the padded path runs fp16/bf16 autocast on CUDA itself

    def __init__(
        self,
        name: str,
        model: str,
        pooling: str = "cls",
        first_layer: int = 1,
        max_length: int = 512,
        batch_size: int = 64,
        device: str | None = None,
        precision: str = "fp32",
        normalize: bool = False,
        template: str = PROMPT_TEMPLATE,
        tokenizer: str | None = None,
        model_name: str | None = None,
        backend: str | None = None,
        hub: HubSettings | None = None,
    ) -> None:
        super().__init__(name, batch_size, device, precision, backend)
        if pooling not in POOLINGS:
            raise InvalidInputError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        self.source = hub_files.resolve(model, hub)
        refuse_random_pooler(self.source.path, pooling, self.source.name)
        self.tokenizer_source = hub_files.resolve(tokenizer, hub) if tokenizer is not None else None
        vocabulary = self.tokenizer_source or self.source
        refuse_missing_tokenizer(vocabulary.path, vocabulary.name)
        if model_name is not None:
            # ``model`` is a path of this machine (a trained run): identity and results name the
            # model by ``model_name`` (its recipe key), the weights hash pins it
            self.source = dataclasses.replace(self.source, name=model_name)
        self.pooling = pooling
        self.first_layer = int(first_layer)
        if int(max_length) < 1:
            raise InvalidInputError(
                f"encoder {name!r}: max_length must be a positive number of tokens, got {max_length}"
            )
        self.max_length = int(max_length)
        self.normalize = bool(normalize)
        #: PromptBERT's template for ``pooling=prompt`` (not a role prompt, see ``Encoder.prompts``)
        self.template = template
        if (
            self.backend != REFERENCE
            and not BACKENDS[self.backend].gives_hidden_states
            and (needs_hidden_states(pooling) or pooling == "cls")
        ):
            raise InvalidInputError(
                f"backend={self.backend} returns only the last hidden state, "
                f"and pooling {pooling!r} "
                "needs more (the pooler or every layer's states): use backend=eager"
            )
        self._model: PreTrainedModel | None = None
        self._tokenizer: Any = None  # a transformers tokenizer, loaded on first use

    # Loading is lazy: listing or fingerprinting an encoder must not cost a model load.
    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            # a folder hub.resolve found: read as it is, never looked up on the hub
            self._tokenizer = AutoTokenizer.from_pretrained(
                str((self.tokenizer_source or self.source).path), local_files_only=True
            )
        return self._tokenizer

    @property
    def model(self) -> PreTrainedModel:
        if self._model is None:
            # only the pooler may be missing (paraphrase-MiniLM-L3-v2, MaskedLM checkpoints ship
            # none), and __init__ has refused pooling 'cls' there
            self._model = load_complete(self.source.path, self.source.name)
            self._model.to(self.device).eval()  # type: ignore[arg-type]  # transformers wraps .to: mypy loses self
        return self._model

    def _declared_mask_token(self) -> str | None:
        return declared_token((self.tokenizer_source or self.source).path)

    def _reads_first_token_only(self) -> bool:
        return self.pooling in FIRST_TOKEN_POOLINGS

    def _tokenizer_if_loaded(self) -> Any | None:
        return self._tokenizer

    def _load_tokenizer(self) -> Any:
        return self.tokenizer

    def _texts(self, sentences: Sequence[str]) -> list[str]:
        if self.pooling != "prompt":
            return list(sentences)
        if self.mask_token is None:
            raise InvalidInputError(f"pooling 'prompt' needs a tokenizer with a mask token ({self.source.name})")
        return [self.template.format(sentence=s, mask=self.mask_token) for s in sentences]

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        if not sentences:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.backend == REFERENCE:
            return self._encode_padded(self._texts(sentences))
        return self.engine(self.model, self.tokenizer, self.max_length).encode(
            self._texts(sentences), self._pool, needs_hidden_states(self.pooling), desc=f"encode {self.name}"
        )

    def _encode_padded(self, texts: list[str]) -> np.ndarray:
        """The reference path: padded batches of ``batch_size`` character-length-sorted texts."""
        import torch
        from tqdm.auto import tqdm

        out: np.ndarray | None = None
        batches = list(length_sorted_batches([len(t) for t in texts], self.batch_size))
        with torch.inference_mode():
            for idx in tqdm(batches, desc=f"encode {self.name}", disable=not shown(), unit="batch"):
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                with autocast(self.device, self.precision):
                    outputs = self.model(**enc, output_hidden_states=needs_hidden_states(self.pooling))
                vecs = self._pool(outputs, enc).cpu().numpy().astype(np.float32, copy=False)
                if out is None:
                    out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
                out[idx] = vecs
        assert out is not None
        return out

    def _pool(self, outputs: Any, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """Sentence vectors of one batch of already-templated texts."""
        import torch

        mask_positions = None
        if self.pooling == "prompt":
            # last mask in the row: the template's; a sentence may itself contain the mask string
            is_mask = enc["input_ids"] == self.tokenizer.mask_token_id
            positions = torch.arange(is_mask.shape[1], device=self.device).expand_as(is_mask)
            mask_positions = torch.where(is_mask, positions, -1).max(dim=1).values
            if (mask_positions < 0).any():
                raise InvalidInputError("a prompt lost its mask token to truncation; raise max_length")
        vecs = pool(self.pooling, outputs, enc["attention_mask"], self.first_layer, mask_positions)
        vecs = vecs.float()
        if self.normalize:
            vecs = torch.nn.functional.normalize(vecs, dim=-1)
        return vecs

    def _token_limit(self) -> int | None:
        return self.max_length

    @property
    def dimension(self) -> int:
        from transformers import AutoConfig

        return int(AutoConfig.from_pretrained(str(self.source.path), local_files_only=True).hidden_size)

    def identity_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "family": "hf",
            "model": self.source.name,
            "revision": self.source.revision,
            "weights_sha256": self.source.weights_sha256,
            "pooling": self.pooling,
            "max_length": self.max_length,
            "precision": self.precision,
            "normalize": self.normalize,
        }
        if self.pooling == "avg_first_last":
            info["first_layer"] = self.first_layer
        if self.pooling == "prompt":
            info["prompt"] = self.template  # the key stored identities were computed with
        if self.tokenizer_source is not None:
            info["tokenizer"] = {"model": self.tokenizer_source.name, "revision": self.tokenizer_source.revision}
        if changes_outputs(self.backend):
            info["backend"] = self.backend
        return info

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            **super().metadata,
            "base_model": self.source.name,
            "pooling": self.pooling,
            **self._run_metadata(),
        }


def build(name: str, spec: Params, context: BuildContext) -> HFEncoder:
    return HFEncoder(name, **{**context.sizes(), **spec}, hub=context.hub)


def check(spec: EncoderSpec) -> None:
    """Numbers that cannot work, refused before any model loads."""
    for key in ("max_length", "batch_size"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise InvalidInputError(f"hf: {key} must be a positive integer, got {value!r}")


FAMILY = Family.of(
    "hf",
    build,
    accepts=HFEncoder,
    check=check,
    takes_prompts=True,
    from_manifest=True,
    usage="hf:<model>?pooling=" + "|".join(POOLINGS) + "&first_layer=0|1&max_length=N&precision=fp32|fp16|bf16",
)
