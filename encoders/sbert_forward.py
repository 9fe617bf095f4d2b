"""A SentenceTransformer's own modules, run on the batches of ``benchharness.encoders.inference``.

``SentenceTransformer.encode`` tokenizes and pads every batch of 64 sentences (sorted by
characters) and runs its module chain. The engine instead tokenizes once and batches by exact
token length; this module hands it the model's transformer and its tokenizer, and turns each
batch's last hidden state into sentence vectors with the model's remaining modules (Pooling,
Normalize, Dense...), so the vectors keep that model's definition.

Only the common shape of model qualifies: a text-only ``Transformer`` first module whose output
is the transformer's ``last_hidden_state`` and no default prompt. Anything else (static
embeddings, routers, multimodal inputs, prompts) stays with ``SentenceTransformer.encode``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from benchharness.encoders.backends import Features

#: the first module's configuration for plain text through the transformer's forward.
TEXT_FORWARD = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}


def engine_unsupported(st) -> str | None:
    """Why ``st`` must go through ``SentenceTransformer.encode``, or None if the engine can run it."""
    from sentence_transformers.base.modules.transformer import Transformer

    first = st[0]
    if not isinstance(first, Transformer):
        return f"first module is {type(first).__name__}, not a Transformer"
    if getattr(first, "modality_config", None) != TEXT_FORWARD or first.module_output_name != "token_embeddings":
        return "the transformer module is not plain text -> last_hidden_state"
    if first.tokenizer is None or not first.tokenizer.is_fast:
        return "no fast tokenizer"
    if getattr(first.model.config, "output_hidden_states", False):
        return "the modules use every layer's hidden states"
    if st.default_prompt_name is not None:
        return "the model has a default prompt"
    return None


class ModuleHead:
    """Every module after the transformer, applied to one batch's token embeddings."""

    def __init__(self, st) -> None:
        self.modules = list(st.children())[1:]

    def __call__(self, outputs: Any, features: Features) -> torch.Tensor:
        # float(): under bf16 autocast the states come back in bf16; pooling sums in fp32 as the
        # fp32 model would
        feats: dict[str, Any] = {**features, "modality": "text", "token_embeddings": outputs.last_hidden_state.float()}
        for module in self.modules:
            feats = module(feats)
        return feats["sentence_embedding"]
