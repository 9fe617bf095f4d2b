"""Alignment and uniformity (Wang & Isola, ICML 2020) as a sentence-embedding objective: two dropout
views of each sentence, mean-pooled and L2-normalised, pulled together (alignment,
E ||x - y||^2) while the batch spreads over the hypersphere (uniformity, log E exp(-t ||x - x'||^2),
on each view).

A complete ``benchharness.methods`` plugin in one module, a declaration plus a model: the options
(one frozen dataclass), a preset, the trainable module (whose class names its options and preset),
and the ``Method`` that declares the module with the examples it trains on (unlabeled sentences). The
harness does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from benchharness.core.flag_types import non_negative_float, positive_float
from benchharness.training.authoring import LossOutput, Method, TrainingMethod, TrainingOptions, option, sentences


@dataclass(frozen=True)
class AlignUniformOptions(TrainingOptions):
    weight: float = option(1.0, "weight of the uniformity loss (lambda)", parse=non_negative_float)
    t: float = option(2.0, "uniformity temperature t (the paper's 2)", parse=positive_float)


PRESETS = {
    # a few minutes on a laptop CPU with a MiniLM: 100 steps of 32 sentences, STS-B dev every 50
    "small": {"batch_size": 32, "max_length": 32, "lr": 3e-5, "max_steps": 100, "warmup_ratio": 0.0, "eval_every": 50},
}


def uniformity(x: torch.Tensor, t: float) -> torch.Tensor:
    """log of the mean Gaussian potential over the distinct pairs of rows."""
    return torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()


class AlignUniform(TrainingMethod):
    method_name = "align-uniform"
    options_class, presets, default_preset = AlignUniformOptions, PRESETS, "small"
    eval_pooling = "avg"

    def __init__(self, encoder: Any, tokenizer: Any, options: AlignUniformOptions) -> None:
        super().__init__(encoder, tokenizer)
        self.weight, self.t, self.max_length = options.weight, options.t, options.max_length

    def collate(self, examples: list[str]) -> dict[str, torch.Tensor]:
        length = self.max_length
        return dict(self.tokenizer(examples, padding=True, truncation=True, max_length=length, return_tensors="pt"))

    def forward(self, batch: dict[str, torch.Tensor]) -> LossOutput:
        n = batch["input_ids"].shape[0]
        doubled = {k: torch.cat([v, v]) for k, v in batch.items()}  # two dropout masks, one pass
        hidden = self.encoder(**doubled).last_hidden_state
        mask = doubled["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        z = F.normalize(self.sized((hidden * mask).sum(1) / mask.sum(1)), dim=-1)  # sized: matryoshka_dims
        x, y = z[:n].float(), z[n:].float()
        align = (x - y).norm(dim=1).pow(2).mean()
        uniform = (uniformity(x, self.t) + uniformity(y, self.t)) / 2
        return LossOutput(align + self.weight * uniform, {"align": float(align), "uniform": float(uniform)})

    def hyperparameters(self) -> dict[str, Any]:
        return {"views": "dropout x2", "pooling": "mean, L2-normalised", "weight": self.weight, "t": self.t}


METHOD = Method.of(
    AlignUniform,
    help="alignment and uniformity (Wang & Isola, 2020) on two dropout views",
    title="align-uniform",
    examples=sentences,
)
