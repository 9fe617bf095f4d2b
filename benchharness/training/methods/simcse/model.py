"""Unsupervised SimCSE (Gao, Yao & Chen 2021): a sentence and itself, two dropout masks apart.

Each sentence of a batch is encoded twice in one forward pass (train mode, so the two copies get
independent dropout); the [CLS] state goes through a training-only MLP (dense + tanh, initialised
as BERT initialises linear layers: N(0, initializer_range), zero bias); the loss is cross-entropy
over the N x N cosine similarities of the first views against the second views divided by the
temperature (0.05), the positive on the diagonal. As the reference implementation does, only the
first-to-second direction is scored (not the symmetric 2N x 2N NT-Xent of ConSERT/SimCLR).
At evaluation the MLP is discarded: ``cls_before_pooler`` (the paper's unsupervised setting).

Reference recipe (BERT-base, wiki1m): batch 64, lr 3e-5, max_len 32, 1 epoch, no warmup, STS-B dev
every 125 steps. The ``cpu`` preset keeps those settings but trains on the STS unlabeled corpus
for a few hundred steps.

The optimizer step follows the official code, which trains with the Hugging Face ``Trainer`` of
transformers 4.2.1 and its defaults: the legacy ``transformers.AdamW`` (``adamw-legacy``, bias
correction on, eps 1e-8, no weight decay) after clipping the gradient norm at 1.0
(``max_grad_norm``), linear decay. Every preset sets these (``OFFICIAL_STEP``);
``tests/fidelity/test_fidelity_simcse.py`` checks the project's step against the official one by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from benchharness.core.flag_types import positive_float
from benchharness.training import data_parallel
from benchharness.training.method import LossOutput, TrainingMethod
from benchharness.training.optim import (
    HF_TRAINER_STEP as OFFICIAL_STEP,  # the official code trains through the Trainer
)
from benchharness.training.options import TrainingOptions, option

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class SimCSEOptions(TrainingOptions):
    temperature: float = option(0.05, "InfoNCE temperature (paper: 0.05)", parse=positive_float)


PRESETS: dict[str, dict[str, Any]] = {
    # the paper's unsupervised BERT-base recipe (1M Wikipedia sentences)
    "paper": {
        "batch_size": 64,
        "lr": 3e-5,
        "max_length": 32,
        "epochs": 1,
        "warmup_ratio": 0.0,
        "eval_every": 125,
        "temperature": 0.05,
        "data": "sts-unlabeled",
        **OFFICIAL_STEP,
    },
    # sized for a 2-core CPU shared by several trainings: the same recipe with batch 32, 150 steps
    # on the STS unlabeled corpus (the paper's wiki1m is not on these machines), dev every 30 steps
    "cpu": {
        "batch_size": 32,
        "lr": 3e-5,
        "max_length": 32,
        "max_steps": 150,
        "warmup_ratio": 0.0,
        "eval_every": 30,
        "temperature": 0.05,
        "data": "sts-unlabeled",
        **OFFICIAL_STEP,
    },
}


def info_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float, offset: int = 0) -> torch.Tensor:
    """SimCSE's loss: row i of ``cos(z1, z2) / t`` should pick column ``offset + i`` (``offset``: where
    this process's rows start among the gathered columns of a data-parallel run)."""
    sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / temperature
    return F.cross_entropy(sim.float(), torch.arange(z1.shape[0], device=z1.device) + offset)


class SimCSE(TrainingMethod):
    method_name = "simcse"
    options_class, presets, default_preset = SimCSEOptions, PRESETS, "cpu"
    eval_pooling = "cls_before_pooler"
    in_batch_negatives = True

    def __init__(self, encoder: PreTrainedModel, tokenizer, options: SimCSEOptions | None = None) -> None:
        super().__init__(encoder, tokenizer)
        options = options or SimCSEOptions()
        hidden = encoder.config.hidden_size
        dense = nn.Linear(hidden, hidden)
        std = getattr(encoder.config, "initializer_range", 0.02)
        nn.init.normal_(dense.weight, mean=0.0, std=std)
        nn.init.zeros_(dense.bias)
        self.mlp = nn.Sequential(dense, nn.Tanh())  # training only, never saved
        self.temperature = options.temperature
        self.max_length = options.max_length

    def collate(self, examples: list[str]) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(
                list(examples), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
        )

    def views(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The two dropout views' [CLS] states after the MLP, shape (N, d) each."""
        n = batch["input_ids"].shape[0]
        doubled = {k: torch.cat([v, v]) for k, v in batch.items()}
        cls = self.sized(self.encoder(**doubled).last_hidden_state[:, 0])
        z = self.mlp(cls)
        return z[:n], z[n:]

    def forward(self, batch: dict[str, torch.Tensor]) -> LossOutput:
        z1, z2 = self.views(batch)
        (a1, _), (_, c2), offset = data_parallel.in_batch(z1, z2)  # the other processes' rows, if any
        return LossOutput(info_nce(a1, c2, self.temperature, offset))

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "views": "dropout x2 (one forward pass of the doubled batch)",
            "dropout": {
                "hidden": getattr(self.encoder.config, "hidden_dropout_prob", None),
                "attention": getattr(self.encoder.config, "attention_probs_dropout_prob", None),
            },
            "train_pooling": "cls + MLP (dense+tanh), MLP discarded at evaluation",
            "loss": "cross-entropy over N x N cosine/temperature, first view -> second view",
        }
