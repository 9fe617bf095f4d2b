"""The contract between a training method and the shared loop: a module that turns a batch into a
loss. A method's own module (``consert/model.py``, ``simcse/model.py``...) subclasses :class:`TrainingMethod`.

The loop trains every parameter of the method (training-only heads included) but saves only
``self.encoder`` and ``self.tokenizer``: the encoder is what the harness evaluates, the heads are
scaffolding that a registered encoder must not depend on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass
class LossOutput:
    """What a method's ``forward`` returns: the loss to minimise and scalars worth logging."""

    loss: torch.Tensor
    logs: dict[str, float] = field(default_factory=dict)


class TrainingMethod(nn.Module):
    """Base class of a method's trainable module.

    Construct it after ``seed_everything(config.seed)`` so that randomly initialised heads are
    reproducible. Implement ``collate(examples) -> batch`` (CPU tensors in a dict, or anything
    ``loop.to_device`` moves) and ``forward(batch) -> LossOutput``; set ``eval_pooling`` (a name
    of ``benchharness.encoders.pooling.POOLINGS``, used at dev evaluation and written into the manifest);
    optionally override ``hyperparameters()`` (method settings for the manifest) and ``size``.
    """

    #: method name, as in its ``methods`` plugin entry (``pyproject.toml``) and the manifest
    method_name: str = ""
    #: pooling at evaluation (and in the manifest)
    eval_pooling: str = "avg"
    #: whether the loss scores rows against the batch's other rows (``data_parallel.in_batch``), which a
    #: data-parallel run can only gather from equal slices of every batch
    in_batch_negatives: bool = False

    def __init__(self, encoder: PreTrainedModel, tokenizer: Any) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer

    def collate(self, examples: list[Any]) -> Any:
        raise NotImplementedError

    def forward(self, batch: Any) -> LossOutput:
        raise NotImplementedError

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    def size(self, batch: Any, examples: list[Any]) -> int:
        """Sentences processed for this batch (throughput); views are not counted twice."""
        return len(examples)
