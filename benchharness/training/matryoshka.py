"""Matryoshka representation learning for any method: its loss at several embedding sizes, summed.

Kusupati et al. (2022) train an embedding whose first d dimensions are a good embedding on their
own. sentence-transformers' ``MatryoshkaLoss`` does it for any loss: it sorts the sizes from the
largest down, scores the wrapped loss on the embedding truncated to each size and returns
``sum(weight_d * loss_d)`` (weights 1 by default). It runs the model once per step and reuses its
output for every size, so that every size sees the same dropout masks and the step costs one
forward pass, not one per size. :class:`Matryoshka` does the same for a benchharness method:

- the method marks its sentence embedding with ``TrainingMethod.sized`` (the representation the
  evaluation pools: SimCSE's [CLS] before its MLP, DefSent+'s [CLS] or mean before its pooler,
  ConSERT's and PaSeR's pooled embedding), so that the loss at size d reads only its first d
  dimensions;
- the first size runs the method's ``forward`` as usual, recording the encoder's outputs in call
  order; every further size runs ``forward`` again on those recorded outputs (the encoder is not
  called again), with the embedding cut to that size.

Two differences from sentence-transformers, both because these losses read the embedding through
heads made for the full width: a cut embedding is zero-padded back to the width (a slice would not
fit SimCSE's MLP), and it is not L2-normalised (these losses normalise where the method does;
a cosine is the same either way). At the full size the loss is therefore exactly the method's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from benchharness.core.errors import InvalidInputError
from benchharness.training.method import LossOutput, TrainingMethod

#: the loss, as a run's manifest records it beside its sizes and weights
DESCRIPTION = (
    "sum over matryoshka_dims of weight x the method's loss on the embedding's first d dimensions "
    "(the rest zeroed), one encoder pass per step (sentence-transformers' MatryoshkaLoss)"
)


@contextmanager
def _replayed(encoder: nn.Module) -> Iterator[Callable[[], None]]:
    """Record the encoder's outputs, in call order, until the returned function is first called;
    from then on answer each call with the recorded output of the same position, counted from
    the last call of that function (sentence-transformers' ``ForwardDecorator`` does the same
    around its model)."""
    recorded: list[Any] = []
    position = [0]
    replaying = [False]
    forward = encoder.forward

    def call(*args: Any, **kwargs: Any) -> Any:
        if not replaying[0]:
            recorded.append(forward(*args, **kwargs))
            return recorded[-1]
        if position[0] >= len(recorded):
            raise RuntimeError("the method calls its encoder more often at a smaller Matryoshka size than at the first")
        position[0] += 1
        return recorded[position[0] - 1]

    def replay() -> None:
        replaying[0] = True
        position[0] = 0

    encoder.forward = call  # an instance attribute, removed below
    try:
        yield replay
    finally:
        del encoder.forward


class Matryoshka(nn.Module):
    """A method's loss as a Matryoshka loss: ``sum(weight_d * loss at size d)`` over ``dims``.

    It holds the method as its only child (the same parameters, so the optimizer, the checkpoint
    and DistributedDataParallel see nothing new). ``dims`` are distinct sizes from the largest
    down, none above the encoder's hidden size; ``weights`` default to 1 each."""

    def __init__(self, method: TrainingMethod, dims: tuple[int, ...], weights: tuple[float, ...] | None = None) -> None:
        super().__init__()
        width = int(method.encoder.config.hidden_size)
        too_large = [d for d in dims if d > width]
        if too_large:
            raise InvalidInputError(
                f"matryoshka_dims {','.join(map(str, too_large))} exceed the embedding size of the base "
                f"model ({width}); choose sizes up to {width}"
            )
        self.method = method
        self.dims = tuple(dims)
        self.weights = tuple(weights) if weights is not None else (1.0,) * len(dims)

    def forward(self, batch: Any) -> LossOutput:
        method = self.method
        total: torch.Tensor | None = None
        logs: dict[str, float] = {}
        try:
            with _replayed(method.encoder) as replay:
                for i, (size, weight) in enumerate(zip(self.dims, self.weights)):
                    if i > 0:
                        replay()  # from the first recorded output again
                    method.matryoshka_size, method.sized_called = size, False
                    output = method(batch)
                    if not method.sized_called:
                        raise InvalidInputError(
                            f"{method.method_name or type(method).__name__} does not mark its sentence embedding "
                            "(TrainingMethod.sized), so it cannot train with matryoshka_dims"
                        )
                    total = weight * output.loss if total is None else total + weight * output.loss
                    logs[f"loss@{size}"] = float(output.loss.detach())
                    if i == 0:
                        logs.update(output.logs)  # the method's own scalars, at the largest size
        finally:
            method.matryoshka_size = None
        assert total is not None  # dims is never empty (options.descending_sizes)
        return LossOutput(total, logs)
