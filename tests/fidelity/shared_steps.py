"""Shared pieces of the per-step fidelity tests.

Each ``test_fidelity_<method>.py`` computes one training step by hand, with plain torch ops on a
second copy of the same tiny random BERT (loaded from the same folder, so the weights are equal),
and compares the project's loss, every trainable parameter's gradient and, where feasible, the
parameters after the project's own optimizer step, to 1e-5.

The hand-written optimizer steps are the ones the official implementations run: all four use the
legacy ``transformers.AdamW`` (transformers 4.2-era), whose update is
``p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)`` (eps *outside* the bias correction;
``correct_bias=False`` drops the factor) followed by decoupled weight decay
``p -= lr * wd * p``; ``torch.optim.AdamW`` puts eps inside (``sqrt(v / (1 - b2^t)) + eps``) and
decays before the update. Both are written out below so that a test can say which one the project
matches: the methods' presets configure the official step (``adamw-legacy``), and the loop's
other optimizer (``torch-adamw``) is checked against torch's update. Each step test also runs the
update it does *not* expect and requires it to land far from the project's parameters, so that the
comparison could tell the two apart. Everything here is independent of the project's code except
:func:`run_project_steps`, which drives the project's training loop (the thing under test) and
records what it fed the model, and :func:`configured_step`, which reads the step settings a
method's presets give (the configuration under test).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

TOL = 1e-5
BETAS = (0.9, 0.999)
#: a step comparison must be able to fail: the update it does not expect lands further than this
APART = 10 * TOL
#: the ``TrainingOptions`` settings that make up an optimizer step
STEP_SETTINGS = ("optimizer", "correct_bias", "adam_eps", "weight_decay", "grad_clip")


def load_tiny(folder: Path, dtype: torch.dtype = torch.float64, dropout: float | None = None):
    """A fresh copy of the tiny BERT in ``folder`` (eager attention, ``dtype``) and its tokenizer;
    ``dropout`` overrides both dropout probabilities of the config."""
    from transformers import AutoModel, AutoTokenizer

    overrides = {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    model = AutoModel.from_pretrained(str(folder), attn_implementation="eager", **overrides).to(dtype)
    return model, AutoTokenizer.from_pretrained(str(folder))


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean of ``logsumexp(row) - row[target]`` over rows whose target is not ``ignore_index``."""
    keep = target != ignore_index
    logits, target = logits[keep], target[keep]
    return (torch.logsumexp(logits, dim=-1) - logits.gather(1, target[:, None]).squeeze(1)).mean()


def masked_mean(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


def grads(named: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Gradient of each tensor (zeros where backward never reached it)."""
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)) for n, p in named.items()}


def reached(named: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of the gradients backward produced; tensors it never reached are left out, as both
    AdamW implementations skip a parameter whose ``grad`` is None (no update, no weight decay)."""
    return {n: p.grad.detach().clone() for n, p in named.items() if p.grad is not None}


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> tuple[float, str]:
    """Largest elementwise |a - b| over tensors of the same names, and the name where it occurs."""
    assert a.keys() == b.keys(), f"parameter sets differ: {sorted(a.keys() ^ b.keys())}"
    worst = max(((float((a[n].double() - b[n].double()).abs().max()), n) for n in a), default=(0.0, ""))
    return worst


def trainable(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p for n, p in module.named_parameters() if p.requires_grad}


def reference_params(method: torch.nn.Module, reference_encoder: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The hand computation's leaf tensors, named as the project's trainable parameters: the
    reference encoder's own parameters, and detached copies (requiring grad) of every other
    trainable tensor of ``method`` (its training heads, whose initialisation is not under test)."""
    own = {f"encoder.{n}": p for n, p in reference_encoder.named_parameters()}
    out = {}
    for name, p in trainable(method).items():
        out[name] = own[name] if name in own else p.detach().clone().requires_grad_(True)
    return out


# ----------------------------------------------------------------------------------------------
# optimizer steps by hand


def clip_(gradients: dict[str, torch.Tensor], max_norm: float) -> None:
    """``torch.nn.utils.clip_grad_norm_``: scale all gradients by max_norm / (total L2 norm + 1e-6)
    when that is below 1."""
    total = math.sqrt(sum(float(g.double().pow(2).sum()) for g in gradients.values()))
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for g in gradients.values():
            g.mul_(coef)


@dataclass
class AdamW:
    """One AdamW per parameter set, written out; ``form`` is ``legacy`` (transformers.AdamW, the
    official implementations' optimizer) or ``torch`` (torch.optim.AdamW)."""

    form: str
    eps: float
    correct_bias: bool = True
    weight_decay: float = 0.0
    no_decay: Callable[[str], bool] = lambda name: True

    def __post_init__(self) -> None:
        self.t = 0
        self.m: dict[str, torch.Tensor] = {}
        self.v: dict[str, torch.Tensor] = {}

    def step(self, params: dict[str, torch.Tensor], gradients: dict[str, torch.Tensor], lr: float) -> None:
        """Update the ``params`` that have a gradient in ``gradients`` (see :func:`reached`)."""
        b1, b2 = BETAS
        self.t += 1
        with torch.no_grad():
            for name, g in gradients.items():
                p = params[name]
                m = self.m[name] = b1 * self.m.get(name, torch.zeros_like(p)) + (1 - b1) * g
                v = self.v[name] = b2 * self.v.get(name, torch.zeros_like(p)) + (1 - b2) * g * g
                wd = 0.0 if self.no_decay(name) else self.weight_decay
                bc1, bc2 = 1 - b1**self.t, 1 - b2**self.t
                if self.form == "legacy":
                    size = lr * math.sqrt(bc2) / bc1 if self.correct_bias else lr
                    p.sub_(size * m / (v.sqrt() + self.eps))
                    p.sub_(lr * wd * p)
                else:
                    p.mul_(1 - lr * wd)
                    p.sub_(lr / bc1 * m / ((v / bc2).sqrt() + self.eps))


def configured_step(presets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The optimizer-step settings (``STEP_SETTINGS``) of a method's presets, which must all set
    every one of them, to the same values."""
    steps = {name: {k: preset[k] for k in STEP_SETTINGS if k in preset} for name, preset in presets.items()}
    for name, step in steps.items():
        assert step.keys() == set(STEP_SETTINGS), f"preset {name} leaves {set(STEP_SETTINGS) - step.keys()} unset"
    first = next(iter(steps.values()))
    assert all(step == first for step in steps.values()), f"the presets step differently: {steps}"
    return dict(first)


def detached(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in params.items()}


def linear_lr(lr: float, step: int, warmup: int, total: int) -> float:
    """transformers' ``get_linear_schedule_with_warmup`` at 0-based ``step``."""
    if step < warmup:
        return lr * step / max(1, warmup)
    return lr * max(0.0, (total - step) / max(1, total - warmup))


# ----------------------------------------------------------------------------------------------
# the project's loop, observed


@dataclass
class Observed:
    """What the project's loop fed its model at one step: the batch and the RNG state at forward."""

    batch: Any
    rng: torch.Tensor


def run_project_steps(
    method: torch.nn.Module, examples: list[Any], base: Path, out: Path, steps: int, **config: Any
) -> list[Observed]:
    """Train ``method`` for ``steps`` steps with the project's loop (one batch = all ``examples``)
    and return each step's batch and the torch RNG state at the start of its forward pass."""
    # the loop under test, as the authoring module re-exports it
    from benchharness.training.authoring import run_loop
    from tests.helpers import training

    seen: list[Observed] = []

    def observe(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        seen.append(Observed(args[0], torch.get_rng_state()))

    handle = method.register_forward_pre_hook(observe)
    try:
        cfg = training(
            base,
            out,
            max_steps=steps,
            batch_size=len(examples),
            drop_last=False,
            eval_every=None,
            eval_at_start=False,
            **config,
        )
        run_loop(method, examples, *cfg, data={"name": "fidelity"})
    finally:
        handle.remove()
    assert len(seen) == steps
    return seen
