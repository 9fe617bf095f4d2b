"""Pooling variants exactly as the method papers define them (see docs/PROTOCOLS.md).

``avg_first_last`` is ambiguous in the literature: SimCSE averages ``hidden_states[1]`` (the first
transformer layer) with the last, PaSeR and ConSERT use ``hidden_states[0]`` (the embedding
output). The layer is therefore an explicit parameter, recorded in the encoder's identity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchharness.core.errors import InvalidInputError

if TYPE_CHECKING:
    import torch

POOLINGS = ("cls", "cls_before_pooler", "avg", "avg_top2", "avg_first_last", "max", "prompt")

#: the DefSent+/PromptBERT template; ``{mask}`` is the tokenizer's mask token.
PROMPT_TEMPLATE = 'This sentence : "{sentence}" means {mask} .'


def needs_hidden_states(pooling: str) -> bool:
    return pooling in ("avg_top2", "avg_first_last")


def masked_mean(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over real tokens only (padding excluded), computed in float32."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(torch.float32)
    summed = (states.to(torch.float32) * mask).sum(dim=1)
    return summed / mask.sum(dim=1).clamp(min=1e-9)


def masked_max(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Per-dimension maximum over real tokens ([CLS] and [SEP] included), padding excluded: DefSent's
    max pooling, which fills padding with -1e6 so that it never wins (-inf here, same result)."""
    padding = (attention_mask == 0).unsqueeze(-1)
    return states.float().masked_fill(padding, float("-inf")).max(dim=1).values


def pool(
    pooling: str,
    outputs,
    attention_mask: torch.Tensor,
    first_layer: int = 1,
    mask_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sentence vectors from a Hugging Face model output.

    ``outputs`` must carry ``hidden_states`` for ``avg_top2``/``avg_first_last`` and a
    ``pooler_output`` for ``cls``; ``mask_positions`` (one token index per row) for ``prompt``.
    """
    import torch

    last = outputs.last_hidden_state
    if pooling == "cls":
        pooled = getattr(outputs, "pooler_output", None)
        if pooled is None:
            raise InvalidInputError("pooling 'cls' needs a model with a pooler; use 'cls_before_pooler'")
        return pooled
    if pooling == "cls_before_pooler":
        return last[:, 0]
    if pooling == "avg":
        return masked_mean(last, attention_mask)
    if pooling == "avg_top2":
        hs = outputs.hidden_states
        return masked_mean((hs[-1] + hs[-2]) / 2.0, attention_mask)
    if pooling == "avg_first_last":
        hs = outputs.hidden_states
        return masked_mean((hs[first_layer] + hs[-1]) / 2.0, attention_mask)
    if pooling == "max":
        return masked_max(last, attention_mask)
    if pooling == "prompt":
        if mask_positions is None:
            raise InvalidInputError("pooling 'prompt' needs the mask token positions")
        return last[torch.arange(last.shape[0], device=last.device), mask_positions]
    raise InvalidInputError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
