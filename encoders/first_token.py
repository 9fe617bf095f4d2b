"""A BERT-shaped encoder's outputs at the first position only, for the poolings that read nothing
else (``cls``, ``cls_before_pooler``).

Every layer but the last must run on every token, since the first token attends to all of them;
the last layer's keys and values too. But its query, attention output, feed-forward and the
norms after them are read only at the first position: computing them there alone gives the same
vector (the other positions' outputs feed nothing), in a ``(batch, 1, hidden)`` last hidden
state. For paraphrase-MiniLM-L3-v2 that is 28% of an encoding's multiply-adds (10 of the 36 d^2
per token of its three layers), 7% for a 12-layer BERT.

Only in eval mode (the training steps compute every position: dropout draws would change
otherwise), on rows of equal length (the inference engine never pads, so there is no mask to
apply), and only for the layer classes whose structure this reproduces (query/key/value
projections, scaled dot-product attention with absolute positions, then the model's own output,
intermediate and output modules); anything else runs the whole model. The vectors differ from the
whole model's by float rounding only (other matrix shapes), ~1e-7, well within
``backends.EXACT_TOLERANCE``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: the poolings that read the last layer at the first position only
FIRST_TOKEN_POOLINGS = ("cls", "cls_before_pooler")
#: layer classes whose forward ``_last_layer_at_first_token`` reproduces (RoBERTa's is BERT's code)
_LAYERS = ("BertLayer", "RobertaLayer", "XLMRobertaLayer")


class _LastLayerInput(Exception):
    """Raised by the hook on the last layer to stop the forward pass there, with its input."""

    def __init__(self, hidden_states: torch.Tensor) -> None:
        super().__init__()
        self.hidden_states = hidden_states


def supported(model: Any) -> bool:
    """Whether ``model`` is an encoder whose last layer can be computed at the first position."""
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    config = getattr(model, "config", None)
    if not layers or config is None or model.training:
        return False
    last = layers[-1]
    return (
        type(last).__name__ in _LAYERS
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
        and not getattr(config, "is_decoder", False)
        and not getattr(config, "add_cross_attention", False)
        and hasattr(last.attention.self, "attention_head_size")
    )


def outputs(model: Any, inputs: dict[str, torch.Tensor]) -> SimpleNamespace:
    """``last_hidden_state`` (batch, 1, hidden) and ``pooler_output`` (when the model has a pooler)
    of ``model`` on unpadded ``inputs``; ``supported(model)`` must hold."""
    last = model.encoder.layer[-1]

    def stop(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        raise _LastLayerInput(args[0] if args else kwargs["hidden_states"])

    handle = last.register_forward_pre_hook(stop, with_kwargs=True)
    try:
        model(**inputs)
    except _LastLayerInput as reached:
        hidden = reached.hidden_states
    else:  # the model never reached its last layer: not the structure ``supported`` expects
        raise RuntimeError(f"{type(model).__name__} did not run its last encoder layer")
    finally:
        handle.remove()
    first = _last_layer_at_first_token(last, hidden)
    pooler = getattr(model, "pooler", None)
    return SimpleNamespace(
        last_hidden_state=first, hidden_states=None, pooler_output=pooler(first) if pooler is not None else None
    )


def _last_layer_at_first_token(layer: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The BERT layer's forward with the query and everything after attention at position 0."""
    import torch.nn.functional as F

    attention = layer.attention.self
    batch, length, _ = hidden.shape
    heads, size = attention.num_attention_heads, attention.attention_head_size

    def split(x: torch.Tensor, n: int) -> torch.Tensor:
        return x.view(batch, n, heads, size).transpose(1, 2)

    first = hidden[:, :1]
    context = F.scaled_dot_product_attention(
        split(attention.query(first), 1),
        split(attention.key(hidden), length),
        split(attention.value(hidden), length),
        scale=getattr(attention, "scaling", None),
    )
    context = context.transpose(1, 2).reshape(batch, 1, heads * size)
    attended = layer.attention.output(context, first)
    return layer.output(layer.intermediate(attended), attended)
