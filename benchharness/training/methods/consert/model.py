"""ConSERT (Yan et al. 2021): contrastive fine-tuning with augmented views made inside the encoder.

Views are made at the embedding layer of a BERT-like encoder, as in the reference implementation
(yym6472/ConSERT, which patches ``BertModel``; here forward hooks do the same on any model with
``embeddings.position_embeddings``):

- ``shuffle``: the position ids of the real tokens ([CLS] and [SEP] included, padding untouched)
  are permuted per sentence, token ids kept in order. Implemented by permuting the rows of the
  position-embedding lookup, which is the same as passing permuted position ids.
- ``token_cutoff``: exactly ``int(n_tokens * rate)`` randomly chosen token rows of the embedding
  output (after LayerNorm) are zeroed; the attention mask is left as is (reference quirk).
- ``feature_cutoff``: exactly ``int(hidden * rate)`` embedding dimensions are zeroed across the
  whole sequence.
- ``dropout``: exactly ``int(n_tokens * hidden * rate)`` elements of the real-token part of the
  embedding output are zeroed, without the 1/(1-p) rescaling of ``nn.Dropout`` (reference quirk).
- ``none``: the plain forward.

Rates (paper section 4.1): token cutoff 0.15, feature cutoff 0.2, dropout 0.2. The loss is
NT-Xent over the 2N views, cosine similarity, temperature 0.1, the 2N-2 other views as negatives.
As the reference code does, the objective sums the two directions' mean losses and multiplies by
``cl_rate`` (0.15) even when the contrastive loss is the only one (``--cl_loss_only``); with Adam
that constant barely matters, but it is kept. Training pools with ``avg``; evaluation uses
``avg_top2`` (the paper's reported setting, docs/PROTOCOLS.md). The unsupervised base recipe
(scripts/unsup-consert-base.sh): views feature_cutoff 0.2 and shuffle, every dropout of the model
off, batch 96, max_len 64, lr 5e-7, 10% warmup, up to 10 epochs with STS-B dev every 200 steps
and patience 10.

The optimizer step follows the official code (sentence-transformers 0.3.9's ``fit`` as main.py
calls it): the legacy ``transformers.AdamW`` without bias correction (``adamw-legacy``,
``correct_bias=False``), eps 1e-6, weight decay 0.01 except biases and LayerNorm, the gradient
norm clipped at 1.0 (``max_grad_norm``), linear warmup and decay. Every preset sets these
(``OFFICIAL_STEP``); ``tests/fidelity/test_fidelity_consert.py`` checks the project's step against the
official one by hand.

Supervised variants (NLI pairs): ``sup`` is SBERT's softmax classifier on [u, v, |u-v|] (the
reference scripts add max(u, v)^2: ``--max-square``); ``joint`` adds ``cl_rate`` times the
contrastive loss of each side's plain view against its token-cutoff (0.1) view. ``sup-unsup`` and
``joint-unsup`` continue a ``sup``/``joint`` run (``--base runs/<that run>``) with the
unsupervised objective on the STS corpus (views: plain vs feature cutoff 0.1, plain vs shuffle).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import fraction, non_negative_float, positive_float
from benchharness.encoders.pooling import masked_mean, needs_hidden_states, pool
from benchharness.training import data_parallel
from benchharness.training.method import LossOutput, TrainingMethod
from benchharness.training.options import TrainingOptions, option
from benchharness.training.train_data import NLI_LABELS, NLIPair

if TYPE_CHECKING:
    from transformers import PreTrainedModel

AUGMENTATIONS = ("none", "shuffle", "token_cutoff", "feature_cutoff", "dropout")
#: the paper's rates (section 4.1); shuffle and none take none
PAPER_RATES = {"token_cutoff": 0.15, "feature_cutoff": 0.2, "dropout": 0.2}
OBJECTIVES = ("unsup", "sup", "joint")

#: the official optimizer step: sentence-transformers 0.3.9 ``fit`` with main.py's optimizer_params
OFFICIAL_STEP: dict[str, Any] = {
    "optimizer": "adamw-legacy",
    "correct_bias": False,
    "adam_eps": 1e-6,
    "weight_decay": 0.01,
    "grad_clip": 1.0,
}
_UNSUP_BASE = {
    "objective": "unsup",
    "data": "sts-unlabeled",
    "batch_size": 96,
    "max_length": 64,
    "lr": 5e-7,
    "warmup_ratio": 0.1,
    "epochs": 10,
    "eval_every": 200,
    "patience": 10,
    "temperature": 0.1,
    "cl_rate": 0.15,
    "eval_max_length": 64,
    **OFFICIAL_STEP,
}
#: the unsupervised recipe's views: feature cutoff 0.2 against token shuffle, no dropout
_UNSUP_VIEWS = {"view1": "feature_cutoff", "rate1": 0.2, "view2": "shuffle", "no_dropout": True}
#: the supervised scripts' shared settings (sup-sbert-base.sh, sup-consert-joint-base.sh)
_SUP_BASE = {
    "batch_size": 96,
    "max_length": 64,
    "lr": 2e-5,
    "warmup_ratio": 0.1,
    "epochs": 1,
    "eval_every": 200,
    "max_square": True,
}
PRESETS: dict[str, dict[str, Any]] = {
    # scripts/unsup-consert-base.sh
    "unsup-base": {**_UNSUP_BASE, **_UNSUP_VIEWS},
    # the same recipe sized for a 2-core CPU shared by several trainings (10-15 s a step): 150 steps
    # of 32 sentences of at most 32 tokens, dev every 30 steps; the paper's lr of 5e-7 would move a
    # model little in 150 steps (the paper's run takes up to ~9,000), hence 5e-6
    "unsup-cpu": {
        **_UNSUP_BASE,
        **_UNSUP_VIEWS,
        "batch_size": 32,
        "max_length": 32,
        "max_steps": 150,
        "eval_every": 30,
        "patience": 3,
        "lr": 5e-6,
    },
    # scripts/sup-sbert-base.sh (stage 1 of sup-unsup): NLI softmax classifier, dropout on
    "sup-base": {"objective": "sup", **_SUP_BASE, "eval_max_length": 64, **OFFICIAL_STEP},
    # scripts/sup-consert-joint-base.sh: classifier + 0.15 x contrastive (plain vs token cutoff 0.1)
    "joint-base": {
        "objective": "joint",
        **_SUP_BASE,
        "temperature": 0.1,
        "cl_rate": 0.15,
        "view1": "none",
        "view2": "token_cutoff",
        "rate2": 0.1,
        "eval_max_length": 64,
        **OFFICIAL_STEP,
    },
    # scripts/sup-consert-sup-unsup-base.sh: continue a sup run, plain vs feature cutoff 0.1, dropout on
    "sup-unsup-base": {**_UNSUP_BASE, "epochs": 25, "view1": "none", "view2": "feature_cutoff", "rate2": 0.1},
    # scripts/sup-consert-joint-unsup-base.sh: continue a joint run, plain vs shuffle, dropout on
    "joint-unsup-base": {**_UNSUP_BASE, "epochs": 25, "view1": "none", "view2": "shuffle"},
}


# ----------------------------------------------------------------------------------------------
# loss


def nt_xent_directions(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float,
    all1: torch.Tensor | None = None,
    all2: torch.Tensor | None = None,
    offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two halves of NT-Xent over 2N views: for view-1 anchors, the mean cross-entropy of
    picking their view-2 partner among the N view-2 and N-1 other view-1 embeddings, and the same
    for view-2 anchors. Cosine similarity divided by ``temperature``.

    In a data-parallel run ``z1``, ``z2`` are this process's anchors and ``all1``, ``all2`` every
    process's views, of which the anchors are rows ``offset`` on (``data_parallel.in_batch``);
    by default (or when they are the anchors themselves) the anchors are the whole batch."""
    whole = all1 is None or all2 is None or (all1 is z1 and all2 is z2)
    z1 = F.normalize(z1.float(), dim=-1)
    z2 = F.normalize(z2.float(), dim=-1)
    n = z1.shape[0]
    labels = torch.arange(n, device=z1.device) + offset
    if whole or all1 is None or all2 is None:  # (whole already says so: this tells the type checker)
        all1, all2 = z1, z2
        self_mask = torch.eye(n, dtype=torch.bool, device=z1.device)
    else:
        all1, all2 = F.normalize(all1.float(), dim=-1), F.normalize(all2.float(), dim=-1)
        self_mask = F.one_hot(labels, all1.shape[0]).bool()
    logits_11 = (z1 @ all1.T / temperature).masked_fill(self_mask, float("-inf"))
    logits_22 = (z2 @ all2.T / temperature).masked_fill(self_mask, float("-inf"))
    logits_12 = z1 @ all2.T / temperature
    logits_21 = logits_12.T if whole else z2 @ all1.T / temperature
    loss_1 = F.cross_entropy(torch.cat([logits_12, logits_11], dim=1), labels)
    loss_2 = F.cross_entropy(torch.cat([logits_21, logits_22], dim=1), labels)
    return loss_1, loss_2


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """NT-Xent as the paper writes it: the mean over all 2N anchors."""
    loss_1, loss_2 = nt_xent_directions(z1, z2, temperature)
    return (loss_1 + loss_2) / 2


# ----------------------------------------------------------------------------------------------
# augmentations


class ViewAugmenter:
    """Forward hooks on a BERT-like encoder's embedding layer that turn the next forward pass
    into one augmented view. Random choices use torch's global RNG (seeded and checkpointed by
    the training loop). ``last`` keeps the most recent choice, for inspection and tests."""

    def __init__(self, encoder: nn.Module) -> None:
        embeddings = getattr(encoder, "embeddings", None)
        positions = getattr(embeddings, "position_embeddings", None)
        if embeddings is None or not isinstance(positions, nn.Embedding):
            raise InvalidInputError(
                "ConSERT's augmentations need a BERT-like encoder with "
                "embeddings.position_embeddings "
                f"(absolute positions); {type(encoder).__name__} has none"
            )
        self._active: tuple[str, float] | None = None
        self._mask: torch.Tensor | None = None
        self.last: dict[str, torch.Tensor] = {}
        self._handles = [
            positions.register_forward_hook(self._on_positions),
            embeddings.register_forward_hook(self._on_embeddings),
        ]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

    @contextlib.contextmanager
    def view(self, name: str, rate: float | None, attention_mask: torch.Tensor) -> Iterator[None]:
        """Within the block, the encoder's forward passes produce the ``name`` view."""
        if name not in AUGMENTATIONS:
            raise InvalidInputError(f"unknown augmentation {name!r}; choose one of {', '.join(AUGMENTATIONS)}")
        if name in PAPER_RATES and not (rate is not None and 0.0 < rate < 1.0):
            raise InvalidInputError(f"augmentation {name} needs a rate in (0, 1), got {rate}")
        self._active, self._mask = (name, float(rate or 0.0)), attention_mask
        try:
            yield
        finally:
            self._active, self._mask = None, None

    @property
    def mask(self) -> torch.Tensor:
        """The attention mask of the view being produced (``view`` sets it for its block)."""
        if self._mask is None:
            raise RuntimeError("no augmented view is active")
        return self._mask

    def _lengths(self) -> torch.Tensor:
        return self.mask.sum(dim=1).long().cpu()

    def _on_positions(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor | None:
        if self._active is None or self._active[0] != "shuffle":
            return None
        bsz, seq_len = self.mask.shape
        order = torch.arange(seq_len).repeat(bsz, 1)
        for row, n in enumerate(self._lengths().tolist()):
            order[row, :n] = torch.randperm(n)
        self.last = {"order": order}
        index = order.to(output.device).unsqueeze(-1).expand(bsz, seq_len, output.shape[-1])
        return output.expand(bsz, seq_len, output.shape[-1]).gather(1, index)

    def _on_embeddings(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor | None:
        if self._active is None or self._active[0] not in PAPER_RATES:
            return None
        name, rate = self._active
        bsz, seq_len, hidden = output.shape
        keep = torch.ones(bsz, seq_len, hidden, dtype=torch.bool)
        for row, n in enumerate(self._lengths().tolist()):
            if name == "token_cutoff":
                keep[row, torch.randperm(n)[: int(n * rate)]] = False
            elif name == "feature_cutoff":
                keep[row, :, torch.randperm(hidden)[: int(hidden * rate)]] = False
            else:  # dropout: elements of the real-token rows, exactly int(n * hidden * rate) of them
                flat = keep[row, :n].reshape(-1)
                flat[torch.randperm(n * hidden)[: int(n * hidden * rate)]] = False
                keep[row, :n] = flat.view(n, hidden)
        self.last = {"keep": keep}
        return output * keep.to(output.device, output.dtype)


def disable_dropout(encoder: nn.Module) -> dict[str, float]:
    """Set every dropout probability of the encoder to 0 (ConSERT's ``--no_dropout``); returns the
    previous values. The saved config keeps its own values: this only changes training."""
    previous = {}
    for name, module in encoder.named_modules():
        if isinstance(module, nn.Dropout):
            previous[name] = module.p
            module.p = 0.0
    return previous


#: what a supervised objective trains on instead of sentences
NLI_DATA = "SNLI/MNLI .jsonl, SimCSE nli .csv, or senteval-snli:<split>"


@dataclass(frozen=True)
class ConSERTOptions(TrainingOptions):
    objective: str = option(
        "unsup",
        "unsup (sentences), sup or joint (NLI pairs; --data a SNLI/MNLI .jsonl, SimCSE .csv or senteval-snli:<split>)",
        choices=OBJECTIVES,
    )
    view1: str = option("feature_cutoff", None, choices=AUGMENTATIONS)
    rate1: float | None = option(
        None, "cutoff/dropout rate of view 1 (default: the paper's)", parse=fraction, recorded="when-set"
    )
    view2: str = option("shuffle", None, choices=AUGMENTATIONS)
    rate2: float | None = option(None, None, parse=fraction, recorded="when-set")
    temperature: float = option(0.1, "NT-Xent temperature (paper: 0.1)", parse=positive_float)
    cl_rate: float = option(0.15, "weight of the contrastive loss (paper: 0.15)", parse=non_negative_float)
    no_dropout: bool = option(
        False,
        "turn off the encoder's dropout",
        off_flag="--dropout",
        off_help="keep the encoder's dropout",
        recorded="when-set",
    )
    max_square: bool = option(
        False, "add max(u,v)^2 to the classifier features (the reference scripts do)", recorded="when-set"
    )
    train_pooling: str = option(
        "avg",
        "pooling during training (ConSERT: avg)",
        choices=("avg", "avg_top2", "avg_first_last", "cls_before_pooler"),
        recorded="when-set",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.objective != "unsup" and self.data == "sts-unlabeled":
            raise InvalidInputError(f"ConSERT {self.objective} trains on NLI pairs: pass --data ({NLI_DATA})")

    def sentence_data(self) -> str | None:
        if self.objective == "unsup":
            return None
        return f"ConSERT {self.objective} trains on NLI pairs, not sentences: pass data=<{NLI_DATA}>"


# ----------------------------------------------------------------------------------------------
# the method


class ConSERT(TrainingMethod):
    method_name = "consert"
    options_class, presets, default_preset = ConSERTOptions, PRESETS, "unsup-cpu"
    eval_pooling = "avg_top2"
    in_batch_negatives = True

    def __init__(self, encoder: PreTrainedModel, tokenizer, options: ConSERTOptions | None = None) -> None:
        """The options' objective, views (a view without a rate takes the paper's), loss weights,
        truncation and training pooling (checked by the options class)."""
        super().__init__(encoder, tokenizer)
        o = options or ConSERTOptions()
        self.objective = o.objective
        self.views = (
            (o.view1, o.rate1 if o.rate1 is not None else PAPER_RATES.get(o.view1)),
            (o.view2, o.rate2 if o.rate2 is not None else PAPER_RATES.get(o.view2)),
        )
        self.temperature, self.cl_rate, self.max_length = o.temperature, o.cl_rate, o.max_length
        self.train_pooling, self.max_square = o.train_pooling, o.max_square
        self.disabled_dropout = disable_dropout(encoder) if o.no_dropout else {}
        self.augmenter = ViewAugmenter(encoder)
        if self.objective != "unsup":
            hidden = encoder.config.hidden_size
            # SBERT's SoftmaxLoss head, training only: [u, v, |u-v|] (+ max(u, v)^2) -> 3 labels
            self.classifier = nn.Linear((4 if self.max_square else 3) * hidden, len(NLI_LABELS))

    # batches
    def _tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        )

    def collate(self, examples: list[Any]) -> dict[str, Any]:
        if self.objective == "unsup":
            if not all(isinstance(e, str) for e in examples):
                raise InvalidInputError(
                    "unsupervised ConSERT trains on sentences; got NLI pairs (use --objective sup/joint)"
                )
            return {"a": self._tokenize(list(examples))}
        if not all(isinstance(e, NLIPair) for e in examples):
            raise InvalidInputError(f"ConSERT objective {self.objective!r} trains on NLI pairs; got sentences")
        return {
            "a": self._tokenize([e.premise for e in examples]),
            "b": self._tokenize([e.hypothesis for e in examples]),
            "labels": torch.tensor([e.label for e in examples]),
        }

    def size(self, batch: dict[str, Any], examples: list[Any]) -> int:
        return len(examples) * (1 if self.objective == "unsup" else 2)

    # embeddings
    def embed(self, features: dict[str, torch.Tensor], view: str = "none", rate: float | None = None) -> torch.Tensor:
        """Sentence embeddings of one view, pooled as in training."""
        with self.augmenter.view(view, rate, features["attention_mask"]):
            outputs = self.encoder(**features, output_hidden_states=needs_hidden_states(self.train_pooling))
        if self.train_pooling == "avg":
            return self.sized(masked_mean(outputs.last_hidden_state, features["attention_mask"]))
        return self.sized(pool(self.train_pooling, outputs, features["attention_mask"], first_layer=0))

    def contrastive(self, features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference's contrastive term (sum of both directions) and the paper's NT-Xent mean;
        in a data-parallel run, against every process's views (``data_parallel.in_batch``)."""
        (v1, r1), (v2, r2) = self.views
        (a1, a2), (c1, c2), offset = data_parallel.in_batch(self.embed(features, v1, r1), self.embed(features, v2, r2))
        loss_1, loss_2 = nt_xent_directions(a1, a2, self.temperature, c1, c2, offset)
        return loss_1 + loss_2, (loss_1 + loss_2) / 2

    def classify(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        parts = [u, v, (u - v).abs()]
        if self.max_square:
            parts.append(torch.maximum(u, v).pow(2))
        return self.classifier(torch.cat(parts, dim=-1))

    def forward(self, batch: dict[str, Any]) -> LossOutput:
        if self.objective == "unsup":
            con, mean = self.contrastive(batch["a"])
            return LossOutput(self.cl_rate * con, {"nt_xent": float(mean.detach())})
        logits = self.classify(self.embed(batch["a"]), self.embed(batch["b"]))
        ce = F.cross_entropy(logits.float(), batch["labels"])
        logs = {"ce": float(ce.detach()), "accuracy": float((logits.argmax(-1) == batch["labels"]).float().mean())}
        if self.objective == "sup":
            return LossOutput(ce, logs)
        con_a, mean_a = self.contrastive(batch["a"])
        con_b, mean_b = self.contrastive(batch["b"])
        logs["nt_xent"] = float(((mean_a + mean_b) / 2).detach())
        return LossOutput(ce + self.cl_rate * (con_a + con_b), logs)

    def hyperparameters(self) -> dict[str, Any]:
        (v1, r1), (v2, r2) = self.views
        out = {
            "objective": self.objective,
            "view1": v1,
            "rate1": r1,
            "view2": v2,
            "rate2": r2,
            "temperature": self.temperature,
            "cl_rate": self.cl_rate,
            "train_pooling": self.train_pooling,
            "dropout_disabled": bool(self.disabled_dropout),
            "loss": "cl_rate x (NT-Xent view1->all + view2->all), as the reference code",
        }
        if self.objective != "unsup":
            out["classifier_features"] = "[u, v, |u-v|" + (", max(u,v)^2]" if self.max_square else "]")
            out["loss"] = "CE" if self.objective == "sup" else "CE + cl_rate x (contrastive(a) + contrastive(b))"
        return out
