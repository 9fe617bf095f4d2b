"""The word-embedding gradient kept in one buffer for a whole training run, written row by row.

Torch's embedding backward returns a dense gradient of the whole vocabulary matrix (BERT's
30,522 x 384 floats, 47 MB) every time the embedding is used: it zero-fills it, and autograd adds
the dense gradients of a step's passes together (PaSeR embeds three times a step). Only the rows of
the batch's tokens are non-zero. :func:`rowwise_gradient` keeps the gradient in one buffer instead:
each pass adds its rows, and a new step zeroes the rows the last one wrote.

The floats are torch's own. Per row, a pass's contributions are summed from +0.0 in token order
(``index_add_`` into zeros, as the dense kernel adds them), and the passes' sums are added in the
order the autograd engine runs them (as its input buffer does). A row no pass touched stays +0.0,
and adding +0.0 to a pass's sum changes nothing (a sum that starts from +0.0 is never -0.0).
``tests/unit/encoders/test_embedding_grad.py`` checks that bit for bit.

It applies where the loop alone decides how gradients accumulate: one process (DDP hooks the
gradient accumulators this bypasses), an ``nn.Embedding`` without ``max_norm``,
``scale_grad_by_freq`` or sparse gradients whose weight no other module shares (a tied output
layer adds its dense gradient through autograd, in an order this cannot follow). A backward that
finds a gradient already there (accumulation without ``zero_grad(set_to_none=True)``) falls back
to torch's dense gradient for that backward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import MethodType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class RowGradient:
    """The gradient buffer of one embedding weight and the rows written since it was last clean."""

    def __init__(self, embedding: nn.Embedding) -> None:
        self.embedding = embedding
        self.buffer = torch.zeros_like(embedding.weight)
        self.rows = torch.empty(0, dtype=torch.long)  # rows of the buffer that may be non-zero
        self.version = self.buffer._version  # in-place writes by anyone else show as a new version
        self.task = -1  # the autograd graph task (one backward call) the last pass belonged to
        self.rowwise = False  # whether this backward accumulates row by row

    def _start(self) -> None:
        """The first pass of a backward call: row by row only onto no gradient (a new step)."""
        weight = self.embedding.weight
        self.rowwise = weight.grad is None
        if not self.rowwise:
            if weight.grad is self.buffer:  # torch's dense gradient will be added into it
                self.version = -1
            return
        if self.buffer._version != self.version:  # scaled, clipped or written by someone else
            self.buffer.zero_()
        else:
            self.buffer.index_fill_(0, self.rows, 0.0)
        self.rows = self.rows[:0]
        weight.grad = self.buffer

    def backward(self, ids: torch.Tensor, grad: torch.Tensor) -> torch.Tensor | None:
        """Add one pass's gradient; return the dense gradient when autograd must add it instead."""
        task = torch._C._current_graph_task_id()
        if task != self.task or task == -1:
            self.task = task
            self._start()
        embedding = self.embedding
        if not self.rowwise:
            padding = -1 if embedding.padding_idx is None else embedding.padding_idx
            return torch.ops.aten.embedding_dense_backward(grad, ids, embedding.num_embeddings, padding, False)
        flat = ids.reshape(-1)
        rows_grad = grad.reshape(-1, grad.shape[-1])
        if embedding.padding_idx is not None:
            keep = flat != embedding.padding_idx
            flat, rows_grad = flat[keep], rows_grad[keep]
        rows, inverse = torch.unique(flat, return_inverse=True)
        sums = rows_grad.new_zeros((rows.numel(), rows_grad.shape[1])).index_add_(0, inverse, rows_grad)
        self.buffer.index_add_(0, rows, sums)
        self.rows = torch.cat([self.rows, rows]) if self.rows.numel() else rows
        self.version = self.buffer._version
        return None


class _Lookup(torch.autograd.Function):
    """``F.embedding`` whose weight gradient goes through a :class:`RowGradient`."""

    @staticmethod
    def forward(ctx: Any, ids: torch.Tensor, weight: torch.Tensor, rows: RowGradient) -> torch.Tensor:
        ctx.rows = rows
        ctx.save_for_backward(ids)
        return F.embedding(ids, weight, rows.embedding.padding_idx)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor | None, None]:
        (ids,) = ctx.saved_tensors
        return None, ctx.rows.backward(ids, grad), None


def eligible(module: nn.Module, embedding: nn.Module) -> bool:
    """Whether ``embedding`` (inside ``module``) can take a row-wise gradient with torch's floats."""
    if not isinstance(embedding, nn.Embedding) or not embedding.weight.requires_grad:
        return False
    if embedding.max_norm is not None or embedding.scale_grad_by_freq or embedding.sparse:
        return False
    if embedding.weight.device.type != "cpu":  # a GPU zero-fills 47 MB in microseconds
        return False
    uses = [p for _, p in module.named_parameters(remove_duplicate=False) if p is embedding.weight]
    return len(uses) == 1


@contextlib.contextmanager
def rowwise_gradient(module: nn.Module, embedding: nn.Module | None) -> Iterator[bool]:
    """While open, ``embedding``'s weight gradient is written row by row (where :func:`eligible`);
    yields whether it is. The module is as it was afterwards."""
    if embedding is None or not eligible(module, embedding):
        yield False
        return
    assert isinstance(embedding, nn.Embedding)
    rows = RowGradient(embedding)

    def forward(self: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        if not (torch.is_grad_enabled() and self.weight.requires_grad):
            return F.embedding(ids, self.weight, self.padding_idx)
        return _Lookup.apply(ids, self.weight, rows)

    embedding.forward = MethodType(forward, embedding)  # type: ignore[method-assign]
    try:
        yield True
    finally:
        del embedding.forward


def input_embedding(method: nn.Module) -> nn.Module | None:
    """The word-embedding module of a training method's encoder (a transformers model), if any."""
    getter = getattr(getattr(method, "encoder", None), "get_input_embeddings", None)
    if not callable(getter):
        return None
    try:
        found = getter()
    except NotImplementedError:  # transformers' base class for models without one
        return None
    return found if isinstance(found, nn.Module) else None
