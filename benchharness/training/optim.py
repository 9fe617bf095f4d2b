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
#: gradient norm clipped at 1.0 (``max_grad_norm``); shared options, for the methods' presets
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
        # CPU scratch for sqrt(v) + eps, one chunk long (never in the state dict): see _update
        self._scratch: torch.Tensor | None = None
        # per row-wise parameter (word embeddings): the rows whose gradient or moments were ever
        # non-zero. Derived from the state when missing (a resumed run), so never saved either
        self._active_rows: dict[torch.Tensor, torch.Tensor] = {}
        # ... and the tall matrices with too many active rows to gain from it (a dense output layer)
        self._dense_rows: set[torch.Tensor] = set()

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
                step_size = lr * math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t) if correct else lr
                moments = (state["exp_avg"], state["exp_avg_sq"])
                rows = self._rows_to_update(p, grad, *moments)
                if rows is None:
                    self._update(p, grad, *moments, (beta1, beta2, eps, step_size))
                else:  # the same update on the rows that can change; the others stay bit-identical
                    part, part_grad, part_avg, part_sq = (x.index_select(0, rows) for x in (p, grad, *moments))
                    self._update(part, part_grad, part_avg, part_sq, (beta1, beta2, eps, step_size))
                    for x, y in zip((p, *moments), (part, part_avg, part_sq)):
                        x.index_copy_(0, rows, y)
                if decay > 0.0:
                    p.add_(p, alpha=-lr * decay)
        return loss

    def _rows_to_update(
        self, p: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor
    ) -> torch.Tensor | None:
        """For a CPU matrix of many rows, the rows whose update is not the identity; None = all.

        A row whose gradient and both moments are exactly zero keeps them zero, and its parameter
        gains ``-step_size * 0 / (sqrt(0) + eps) = -0.0``, which leaves every float as it was:
        skipping the row is exact. Word embeddings are such a matrix: a batch touches a few hundred
        of ~30,000 rows, and the rows ever touched stay a minority over a short run, so the update
        (memory-bound: seven passes over four tensors) reads a fraction of the table."""
        if p.device.type != "cpu" or p.dim() != 2 or p.shape[0] < ROW_WISE_MIN_ROWS or p in self._dense_rows:
            return None
        active = self._active_rows.get(p)
        if active is None:  # first step, or a resumed run: the rows the saved moments touched
            active = self._active_rows[p] = _nonzero_rows(exp_avg) | _nonzero_rows(exp_avg_sq)
        active |= _nonzero_rows(grad)
        rows = active.nonzero().squeeze(1)
        if rows.numel() < p.shape[0] * ROW_WISE_MAX_SHARE:
            return rows
        self._dense_rows.add(p)  # active rows only grow: whole updates from now on, no more row checks
        del self._active_rows[p]
        return None

    def _update(
        self,
        p: torch.Tensor,
        grad: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        hyper: tuple[float, float, float, float],
    ) -> None:
        """The Adam update of one tensor, operation by operation as ``transformers.AdamW``.

        On CPU, the seven element-wise operations run chunk by chunk on flat views, so that each
        chunk stays in cache between them: one pass over memory instead of seven, with the same
        operations on the same elements (chunks start at multiples of the vector width, so every
        element takes the same kernel path as in one whole-tensor call), hence the same floats."""
        tensors = (p, grad, exp_avg, exp_avg_sq)
        if p.device.type != "cpu" or not all(x.is_contiguous() for x in tensors):
            _adam_ops(p, grad, exp_avg, exp_avg_sq, torch.empty_like(exp_avg_sq), hyper)
            return
        if self._scratch is None or self._scratch.dtype != p.dtype:
            self._scratch = torch.empty(CHUNK, dtype=p.dtype)
        flat_p, flat_g, flat_m, flat_v = (x.view(-1) for x in tensors)
        n = flat_p.numel()
        for start in range(0, n, CHUNK):
            end = min(n, start + CHUNK)
            chunk = slice(start, end)
            _adam_ops(flat_p[chunk], flat_g[chunk], flat_m[chunk], flat_v[chunk], self._scratch[: end - start], hyper)


def _adam_ops(
    p: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    denom: torch.Tensor,
    hyper: tuple[float, float, float, float],
) -> None:
    """``transformers.AdamW``'s update of one tensor (or chunk) in place; ``denom``: scratch."""
    beta1, beta2, eps, step_size = hyper
    exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    torch.sqrt(exp_avg_sq, out=denom).add_(eps)
    p.addcdiv_(exp_avg, denom, value=-step_size)


@torch.no_grad()
def clip_gradients(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_(parameters, max_norm)``, without its multiplication of every
    gradient by exactly 1.0 when the norm is within ``max_norm``: the same norm (torch's own
    ``get_total_norm``), the same coefficient ``max_norm / (norm + 1e-6)`` clamped at 1, the same
    scaling whenever it is below 1 (or NaN), and one pass over all gradients less otherwise."""
    params = [p for p in parameters if p.grad is not None]
    total = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    if not bool(max_norm / (total + 1e-6) >= 1.0):
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


def _nonzero_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows holding a value other than +-0 (NaN included). Two reductions: several times faster
    than ``x.ne(0).any(1)``, which materialises a boolean copy of the matrix."""
    return x.amax(1).ne(0) | x.amin(1).ne(0)


#: elements per in-cache pass of the CPU update: a multiple of every vector width, and four
#: tensors' chunks (plus the scratch) fit in the L2 caches of two cores
CHUNK = 1 << 18
#: a CPU matrix with at least this many rows is updated row-wise (word embeddings, output vocabularies)
ROW_WISE_MIN_ROWS = 4096
#: ... unless this share of its rows or more is active: then gathering costs more than it saves
ROW_WISE_MAX_SHARE = 0.5
