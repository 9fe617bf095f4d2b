"""DefSent+ (Liu, 2024): classify each dictionary definition into its entry, against a frozen
matrix of entry embeddings built from the encoder's own embeddings of the definitions, rebuilt
round after round (progressive separate training, PST).

One round (paper eqs. 3-5, 6-8, 9-12; official ``TrainEncoder.py``):

* entry matrix ``E`` (entries x hidden): AC or AMP (``entry_space.py``) of every entry's
  definitions under the previous round's encoder (round 1: the base checkpoint); optionally the
  ICA candidate space of that matrix (``--ica-rounds``);
* the encoder being trained is always the *original* checkpoint (PST's "separate": continuing from
  the previous round would amount to more than one epoch, which the paper finds harmful);
* a definition is pooled with the model's pooler, over [CLS] (``--training-pooling cls``: BERT's
  pooler output) or over the masked mean of the last layer (``mean``: the official code feeds the
  mean through the same pooler); logits = ``E @ h`` (a bias-free linear head whose weight is the
  frozen ``E``); cross-entropy against the entry's index;
* exactly one epoch over all (definition, entry) pairs in random order, the last partial batch
  kept (the official ``RandomSampler`` loader); the optimizer step of the official script, which
  the project follows: the legacy ``transformers.AdamW`` (``adamw-legacy``: lr per round, eps 1e-6,
  bias correction on, no weight decay), gradient norm clipped at 1.0, linear decay with no
  warmup (``DEFAULTS``; ``tests/fidelity/test_fidelity_defsent_plus.py`` checks the step by hand); the final
  weights are the encoder (no dev selection).

The pooler: BERT keeps its pretrained pooler (dense + tanh). RoBERTa's pooler is initialised from
the MLM head's dense layer with GELU, as the paper does (the pooler never saw a pre-training
objective). A checkpoint without pooler weights (paraphrase-MiniLM-L3-v2 ships none) gets the
freshly initialised BERT pooler of ``AutoModel`` (seeded), trained with the model; the manifest
says which case applied. The pooler only serves training: at inference the harness pools with
``cls_before_pooler`` ([CLS] without pooler), ``avg`` or ``prompt`` (the paper's three).

The rounds are run by ``benchharness.training.methods.defsent_plus.method``: each round is registered as its
own encoder (``--out runs/defsent-plus-l3`` writes ``runs/defsent-plus-l3-r1``, ``-r2``...), each
with ``entry_space.png``, the 2-d SVD and whitened-PCA views of the entry space that round trained
against (paper Figures 1-3); the last round also plots the space its own encoder builds
(``entry_space_after.png``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from benchharness.core.errors import InvalidInputError
from benchharness.encoders import hub
from benchharness.encoders.checkpoint import checkpoint_keys
from benchharness.encoders.pooling import masked_mean
from benchharness.training.method import LossOutput, TrainingMethod

if TYPE_CHECKING:
    from transformers import PreTrainedModel

TRAINING_POOLINGS = ("cls", "mean")

#: the paper's BERT-base learning rates for the 1st, 2nd, 3rd round (Appendix A, Table 5)
PAPER_LRS = (5e-5, 4e-5, 3e-5)

#: the protocol's training settings: DefSent+'s defaults of the shared options (``method.py``)
DEFAULTS: dict[str, Any] = {
    "batch_size": 32,  # the paper's batch for its WordNet+Oxford dictionary (16 for smaller ones)
    "max_length": 150,  # the official max_seq_length (no definition is longer: Table 1 max 138)
    # the official step: TrainEncoder.py's transformers.AdamW(lr, eps=1e-6), clip_grad_norm_(1.0)
    "optimizer": "adamw-legacy",
    "correct_bias": True,
    "weight_decay": 0.0,
    "adam_eps": 1e-6,
    "grad_clip": 1.0,
    "epochs": 1,
    "warmup_ratio": 0.0,
    "drop_last": False,
    "eval_every": None,
    "eval_at_start": False,
    "seed": 42,
}


def _checkpoint_tensor(folder: Path, name: str) -> torch.Tensor:
    for f in hub.WEIGHT_FILES:
        path = Path(folder) / f
        if path.exists() and f.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(str(path), "pt") as fh:
                if name in fh.keys():  # noqa: SIM118 (safetensors' safe_open has keys() but no __contains__)
                    return fh.get_tensor(name)
        elif path.exists():
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            if name in state:
                return state[name].clone()
    raise KeyError(name)


def prepare_pooler(encoder: PreTrainedModel, folder: Path) -> tuple[nn.Module | None, str]:
    """Set up the training-time pooler; return a new module when the model has none, and a note.

    ``folder`` is the base checkpoint, read to tell a pretrained pooler from a newly initialised
    one and, for RoBERTa, to fetch the MLM head's dense layer.
    """
    keys = checkpoint_keys(folder)
    pooler = getattr(encoder, "pooler", None)
    model_type = getattr(encoder.config, "model_type", "")
    if pooler is None:
        hidden = encoder.config.hidden_size
        dense = nn.Linear(hidden, hidden)
        nn.init.normal_(dense.weight, std=getattr(encoder.config, "initializer_range", 0.02))
        nn.init.zeros_(dense.bias)
        return nn.Sequential(
            dense, nn.Tanh()
        ), f"{model_type} has no pooler module: a fresh dense+tanh pooler (training only, not saved)"
    if "roberta" in model_type:
        weight = next((k for k in keys if k.endswith("lm_head.dense.weight")), None)
        if weight is None:
            return None, (
                "RoBERTa checkpoint without an MLM head: its pooler is kept as loaded (dense+tanh); "
                "the paper initialises it from the MLM head's dense layer with GELU"
            )
        with torch.no_grad():
            pooler.dense.weight.copy_(_checkpoint_tensor(folder, weight))
            pooler.dense.bias.copy_(_checkpoint_tensor(folder, weight.replace(".weight", ".bias")))
        pooler.activation = nn.GELU()
        return None, "RoBERTa pooler initialised from the MLM head's dense layer, activation GELU (paper)"
    if any(k.endswith("pooler.dense.weight") for k in keys):
        return None, "the checkpoint's pretrained pooler (dense+tanh)"
    return None, (
        "the checkpoint has no pooler weights: the freshly initialised (seeded) BERT pooler "
        "(dense+tanh), trained with the model"
    )


class DefSentPlus(TrainingMethod):
    """The encoder + its pooler, classifying definitions into the frozen entry matrix."""

    method_name = "defsent-plus"
    entry_matrix: torch.Tensor  # a registered buffer (torch types a module's attributes Tensor | Module)

    def __init__(
        self,
        encoder: PreTrainedModel,
        tokenizer,
        entry_matrix: torch.Tensor,
        training_pooling: str = "cls",
        max_length: int = 150,
        eval_pooling: str = "avg",
        extra_pooler: nn.Module | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(encoder, tokenizer)
        if training_pooling not in TRAINING_POOLINGS:
            raise InvalidInputError(
                f"unknown training pooling {training_pooling!r}; choose one of {', '.join(TRAINING_POOLINGS)}"
            )
        if entry_matrix.shape[1] != encoder.config.hidden_size:
            raise InvalidInputError(
                f"entry matrix has {entry_matrix.shape[1]} columns, the encoder {encoder.config.hidden_size}"
            )
        # a buffer, not a parameter: the optimizer never sees it and no gradient flows into it
        self.register_buffer("entry_matrix", torch.as_tensor(entry_matrix, dtype=torch.float32).clone())
        self.training_pooling = training_pooling
        self.max_length = int(max_length)
        self.eval_pooling = eval_pooling
        self.extra_pooler = extra_pooler
        self.details = dict(details or {})

    def collate(self, examples: list[tuple[str, int]]) -> dict[str, Any]:
        texts = [t for t, _ in examples]
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        return {"inputs": dict(enc), "labels": torch.tensor([e for _, e in examples], dtype=torch.long)}

    def pooled(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training representation h(s): pooler(dense+activation) over [CLS] or the mean."""
        last = self.encoder(**inputs).last_hidden_state
        x = last[:, 0] if self.training_pooling == "cls" else masked_mean(last, inputs["attention_mask"]).to(last.dtype)
        x = self.sized(x)
        if self.extra_pooler is not None:
            return self.extra_pooler(x)
        pooler: Any = self.encoder.pooler  # the model's own (BertPooler...): a dense layer and its activation
        return pooler.activation(pooler.dense(x))

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.pooled(inputs).float() @ self.entry_matrix.T

    def forward(self, batch: dict[str, Any]) -> LossOutput:
        logits = self.logits(batch["inputs"])
        loss = F.cross_entropy(logits, batch["labels"])
        accuracy = (logits.detach().argmax(-1) == batch["labels"]).float().mean().item()
        return LossOutput(loss, {"accuracy": accuracy})

    def hyperparameters(self) -> dict[str, Any]:
        return {
            "training_pooling": self.training_pooling,
            "n_entries": int(self.entry_matrix.shape[0]),
            "head": "bias-free linear, weight = frozen entry matrix",
            "loss": "cross-entropy over entries",
            **self.details,
        }


def round_lrs(spec: str | None, lr: float | None, rounds: int) -> list[float]:
    """Learning rate of each round: ``--round-lrs`` (the last value repeats), else ``--lr`` for all,
    else the paper's BERT-base schedule 5e-5, 4e-5, 3e-5 (then 3e-5)."""
    if spec:
        values = [float(v) for v in spec.split(",") if v.strip()]
    elif lr is not None:
        values = [lr]
    else:
        values = list(PAPER_LRS)
    return [values[min(i, len(values) - 1)] for i in range(rounds)]
