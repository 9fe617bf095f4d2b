"""The AdamW of the official code of all four methods: the legacy ``transformers.AdamW``.

SimCSE and PaSeR train through the Hugging Face ``Trainer`` of transformers 4.2 (its optimizer is
``transformers.AdamW``), ConSERT through sentence-transformers 0.3.9's ``fit`` (``transformers.AdamW``
with ``correct_bias=False``), and DefSent+'s ``TrainEncoder.py`` builds ``transformers.AdamW``
itself. transformers has since removed that class, and ``torch.optim.AdamW`` is not the same
update, so the project keeps its own :class:`LegacyAdamW`, written from the algorithm.

Per parameter ``p`` with gradient ``g``, at step ``t`` (counted per parameter from 1)::

    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    step_size = lr * sqrt(1 - b2^t) / (1 - b1^t)     (just lr when correct_bias is False)
    p = p - step_size * m / (sqrt(v) + eps)
    p = p - lr * weight_decay * p                     (decoupled decay, after the Adam update)

It differs from ``torch.optim.AdamW`` in three places: eps is added to ``sqrt(v)`` before the bias
correction (torch adds it to ``sqrt(v / (1 - b2^t))``, so the legacy update's effective eps is
``eps / sqrt(1 - b2^t)``, ~32x larger at step 1); ``correct_bias=False`` drops the bias correction
altogether (ConSERT: its steps are then larger than torch's by (1 - b1^t) / sqrt(1 - b2^t):
3.2x at step 1, 6.6x around step 12, 3.2x at step 100, 1.3x at step 1,000); and weight decay
shrinks the already updated parameter (torch decays before the update).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, overload

import torch

from benchharness.core.errors import InvalidInputError

#: the optimizer step of the Hugging Face ``Trainer`` (transformers 4.2.1) with its defaults, through
#: which SimCSE and PaSeR train: legacy AdamW with bias correction, eps 1e-8, no weight decay, the
#: gradient norm clipped at 1.0 (``max_grad_norm``); ``TrainConfig`` settings, for their presets
HF_TRAINER_STEP: dict[str, Any] = {
    "optimizer": "adamw-legacy",
    "correct_bias": True,
    "adam_eps": 1e-8,
    "weight_decay": 0.0,
    "grad_clip": 1.0,
}


class LegacyAdamW(torch.optim.Optimizer):
    """``transformers.AdamW`` as it was until its removal (defaults included: eps 1e-6, no
    weight decay, bias correction on). Its state (``step``, ``exp_avg``, ``exp_avg_sq`` per
    parameter) round-trips through ``state_dict``/``load_state_dict`` like torch's optimizers."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        correct_bias: bool = True,
    ) -> None:
        if not lr >= 0.0:
            raise InvalidInputError(f"invalid learning rate {lr!r}: must be >= 0")
        if not all(0.0 <= b < 1.0 for b in betas) or len(betas) != 2:
            raise InvalidInputError(f"invalid betas {betas!r}: two numbers in [0, 1)")
        if not eps >= 0.0:
            raise InvalidInputError(f"invalid eps {eps!r}: must be >= 0")
        if not weight_decay >= 0.0:
            raise InvalidInputError(f"invalid weight_decay {weight_decay!r}: must be >= 0")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "correct_bias": bool(correct_bias),
        }
        super().__init__(params, defaults)
        # sqrt(v) + eps of each parameter, rewritten in place every step: a fresh tensor the size of
        # the word embeddings costs more in page faults than the arithmetic on it. Scratch space
        # only, never in the state dict
        self._denominators: dict[torch.Tensor, torch.Tensor] = {}

    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            decay, correct = group["weight_decay"], group["correct_bias"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("LegacyAdamW does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                denom = self._denominators.get(p)
                if denom is None or denom.shape != p.shape:
                    denom = self._denominators[p] = torch.empty_like(exp_avg_sq)
                torch.sqrt(exp_avg_sq, out=denom).add_(eps)
                step_size = lr * math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t) if correct else lr
                p.addcdiv_(exp_avg, denom, value=-step_size)
                if decay > 0.0:
                    p.add_(p, alpha=-lr * decay)
        return loss
