"""PaSeR (Wu & Zhao, EMNLP 2022): phrase-aware sentence representations by phrase reconstruction.

A sentence ``s`` (after an EDA augmentation, synonym replacement by default) is duplicated as
``s~`` with its top-k RAKE phrases masked (every subword token of a chosen phrase becomes the mask
token, so both copies have the same tokens elsewhere). The encoder embeds both; a decoding signal
built from the two embeddings is the memory a small transformer decoder cross-attends to while it
reconstructs the masked phrases (teacher forcing). Loss = decoder cross-entropy + MLM
cross-entropy on ``s``. The decoder, the signal's projection and the LM head are training-only:
only the encoder is saved.

Two signal forms, four memory slots each (shape ``(batch, 4, hidden)``):

- ``paper`` (Eq. 2): ``[Es, Es~, m|Es - Es~|, n|Es * Es~|]``, m = n = 10 best (Table 8);
- ``official`` (the authors' ``paser/models.py``): ``[t(z1 * W z2), k(z1 - W z2), z1, W z2]``
  with ``W`` a trainable linear map and no absolute values; t = k = 1 in its example script.

Choices taken from the official code, reproduced with their quirks:

- the decoder is a ``BartDecoder`` (6 layers, FFN width = hidden size, 16 heads, its own learned
  positions and embedding LayerNorm) whose token embedding module *is the encoder's embedding
  module* (word + BERT positions + token types + LayerNorm), so decoder inputs pass through both
  position embeddings;
- decoder input = [CLS] + phrase tokens, target = phrase tokens + [SEP];
- a pair whose tokenized sentence reaches ``max_length`` tokens (possibly truncated) gets no
  decoder loss (the collator's ``len < 32`` test), only MLM;
- MLM: 15% of the non-special tokens of ``s``; 80% mask, 10% random token, 10% kept; a separate
  encoder pass; the decoder and MLM share one LM head (the official code's ``lm_head``);
- the LM head is an *untied* ``BertLMPredictionHead``: the official code loads it from the
  checkpoint's ``cls.predictions`` (``--do_mlm``), so its output matrix starts as a copy of the
  word embeddings and is then trained as a parameter of its own (``BertForCL`` ties nothing). Here
  the output matrix is the checkpoint's ``cls.predictions.decoder.weight`` when the checkpoint
  stores one, else a copy of the encoder's word embeddings (the same values for a tied
  checkpoint); the word embeddings get only the encoder side's gradient;
- the optimizer step of the official ``Trainer`` (transformers 4.2.1 defaults), which the presets
  follow (``OFFICIAL_STEP``): the legacy ``transformers.AdamW`` (``adamw-legacy``, bias correction
  on, eps 1e-8, no weight decay) after clipping the gradient norm at 1.0.
  ``tests/fidelity/test_fidelity_paser.py`` checks the loss, gradients and two optimizer steps by hand.

Where the official code is silent or its data are missing (``data/raw.csv``/``augmented.csv`` are
not in its repository): the decoder target is the chosen phrases' surface text in sentence order
joined by spaces; the LM head's transform is loaded from the checkpoint's ``cls.predictions`` when
the checkpoint has an MLM head, else initialised randomly (the MiniLM checkpoints have none; the
manifest says which).

The supervised variant adds SimCSE's supervised loss (anchor, entailment, contradiction
triples, temperature 0.05): ``loss = contrastive + alpha * decoder CE (+ mlm_weight * MLM)``
(Eq. 5), initialised from an unsupervised PaSeR run (``--base runs/<paser run>``).

The syntactic phrase variant (NLTK parse-tree NP/VP/SBAR) is not offered: it needs a POS tagger
or parser model, and none is available offline (the shared NLTK data holds only WordNet and the
stopwords; NLTK's tagger and spaCy's models are not distributed through PyPI by their authors).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import fraction, non_negative_float, positive_float, positive_int, probability
from benchharness.encoders.pooling import POOLINGS, needs_hidden_states, pool
from benchharness.training import data_parallel
from benchharness.training.base_model import Base
from benchharness.training.method import LossOutput, TrainingMethod
from benchharness.training.methods.paser.eda import AUGMENTATIONS, Augmenter
from benchharness.training.methods.paser.rake import english_stopwords, rake
from benchharness.training.optim import (
    HF_TRAINER_STEP as OFFICIAL_STEP,  # the official code trains through the Trainer
)
from benchharness.training.options import TrainingOptions, option

if TYPE_CHECKING:
    from transformers import PreTrainedModel

SIGNALS = ("paper", "official")
TRAIN_POOLINGS = tuple(p for p in POOLINGS if p != "prompt")  # prompt pooling needs a template per view

_PAPER = {
    **OFFICIAL_STEP,
    "batch_size": 64,
    "lr": 3e-5,
    "max_length": 32,
    "warmup_ratio": 0.0,
    "eval_every": 125,
    "pooling": "cls_before_pooler",
    "decoder_layers": 6,
    "decoder_heads": 16,
    "top_k": 3,
    "augment": "sr",
    "augment_ratio": 0.5,
    "signal": "paper",
    "m": 10.0,
    "n": 10.0,
    "t": 1.0,
    "k": 1.0,
    "mlm_weight": 1.0,
    "mlm_probability": 0.15,
}
PRESETS: dict[str, dict[str, Any]] = {
    # the paper's unsupervised recipe (Sec. 4.2 and the official example script): 5 epochs of the
    # STS unlabeled corpus, batch 64, lr 3e-5, max_len 32, STS-B dev every 125 steps, no warmup
    "paper": {**_PAPER, "epochs": 5, "data": "sts-unlabeled"},
    # a shared 2-core CPU (about 10 s a step there): the same recipe with batch 32, a 2-layer
    # decoder, 100 steps and STS-B dev every 50 steps
    "cpu": {
        **_PAPER,
        "batch_size": 32,
        "max_steps": 100,
        "eval_every": 50,
        "decoder_layers": 2,
        "data": "sts-unlabeled",
    },
    # supervised (Sec. 3.3): SimCSE's supervised recipe (batch 512, lr 5e-5, 3 epochs, temp 0.05)
    # on SNLI+MNLI triples plus alpha * the generative loss; alpha is searched in the paper and not
    # published: 0.1 here. No augmentation, no MLM (Eq. 5 has neither).
    "paper-sup": {
        **_PAPER,
        "batch_size": 512,
        "lr": 5e-5,
        "epochs": 3,
        "supervised": True,
        "data": "nli/nli_for_simcse.csv",
        "alpha": 0.1,
        "temperature": 0.05,
        "augment": "none",
        "mlm_weight": 0.0,
    },
}


# ----------------------------------------------------------------------------------------------
# model parts


class DecodingSignal(nn.Module):
    """The decoder's memory: four vectors per sentence pair, ``(batch, 4, hidden)``."""

    def __init__(
        self,
        form: str,
        hidden: int,
        m: float = 10.0,
        n: float = 10.0,
        t: float = 1.0,
        k: float = 1.0,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        if form not in SIGNALS:
            raise InvalidInputError(f"unknown signal form {form!r}; choose one of {', '.join(SIGNALS)}")
        self.form = form
        self.m, self.n, self.t, self.k = float(m), float(n), float(t), float(k)
        if form == "official":
            self.projection = nn.Linear(hidden, hidden)
            nn.init.normal_(self.projection.weight, std=init_std)
            nn.init.zeros_(self.projection.bias)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """``z1``: embeddings of the sentences, ``z2``: of their phrase-masked copies."""
        if self.form == "paper":
            slots = [z1, z2, self.m * (z1 - z2).abs(), self.n * (z1 * z2).abs()]
        else:
            w = self.projection(z2)
            slots = [self.t * (z1 * w), self.k * (z1 - w), z1, w]
        return torch.stack(slots, dim=1)

    def describe(self) -> dict[str, Any]:
        if self.form == "paper":
            return {"form": "paper", "slots": "[Es, Es~, m|Es-Es~|, n|Es*Es~|]", "m": self.m, "n": self.n}
        return {"form": "official", "slots": "[t(z1*Wz2), k(z1-Wz2), z1, Wz2]", "t": self.t, "k": self.k}


class _Transform(nn.Module):
    """``cls.predictions.transform``: a dense layer and a LayerNorm, under the names its checkpoint keys use."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)


class LMHead(nn.Module):
    """BERT's MLM head (``BertLMPredictionHead``): dense + activation + LayerNorm, then logits
    against its own output matrix plus a bias. The output matrix is untied, as in the official
    code: a parameter of the head (``decoder.weight``), initialised as a copy of the word
    embeddings and trained separately from them. Parameter names follow ``cls.predictions`` so a
    checkpoint's head loads (:meth:`load_from_checkpoint`)."""

    def __init__(self, config, word_embeddings: nn.Module) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        hidden = config.hidden_size
        vocab = word_embeddings.get_parameter("weight").shape[0]
        self.transform = _Transform(hidden, eps=getattr(config, "layer_norm_eps", 1e-12))
        self.act = ACT2FN[getattr(config, "hidden_act", "gelu")]
        self.decoder = nn.Linear(hidden, vocab, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab))
        nn.init.normal_(self.transform.dense.weight, std=getattr(config, "initializer_range", 0.02))
        nn.init.zeros_(self.transform.dense.bias)
        with torch.no_grad():  # a copy, not the same tensor: the official head is not tied
            self.decoder.weight.copy_(word_embeddings.get_parameter("weight"))
        self.output_note = "a copy of the word embeddings"

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        x = self.transform.LayerNorm(self.act(self.transform.dense(hidden)))
        return self.decoder(x) + self.bias

    def load_from_checkpoint(self, folder: Path) -> bool:
        """Copy ``cls.predictions.*`` from the checkpoint's weights; False if it has no MLM head.
        The output matrix is the checkpoint's ``decoder.weight`` when it stores one (a tied
        checkpoint may leave it out: the copy of the word embeddings stays, the same values)."""
        weights = _read_weights(folder)
        prefix = "cls.predictions."
        found = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
        wanted = {
            "transform.dense.weight",
            "transform.dense.bias",
            "transform.LayerNorm.weight",
            "transform.LayerNorm.bias",
        }
        if not wanted <= set(found):
            return False
        bias = found.get("bias", found.get("decoder.bias"))
        state = {k: found[k] for k in wanted}
        if bias is not None:
            state["bias"] = bias
        output = found.get("decoder.weight")
        if output is not None and output.shape == self.decoder.weight.shape:
            state["decoder.weight"] = output
            self.output_note = "the checkpoint's cls.predictions.decoder.weight"
        self.load_state_dict(state, strict=False)
        return True


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    folder = Path(folder)
    if (folder / "model.safetensors").exists():
        from safetensors.torch import load_file

        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").exists():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return {}


def build_decoder(hidden: int, layers: int, heads: int, vocab_size: int, dropout: float = 0.1):
    """The official code's decoder: a BartDecoder with FFN width = hidden and 16 heads; its own
    token embedding is dropped (PaSeR feeds it the encoder's embeddings)."""
    from transformers import BartConfig
    from transformers.models.bart.modeling_bart import BartDecoder

    if hidden % heads:
        raise InvalidInputError(f"decoder heads ({heads}) must divide the hidden size ({hidden}); pass --decoder-heads")
    config = BartConfig(
        vocab_size=vocab_size,
        d_model=hidden,
        decoder_layers=layers,
        decoder_ffn_dim=hidden,
        decoder_attention_heads=heads,
        max_position_embeddings=512,
        dropout=dropout,
        activation_function="gelu",
        decoder_layerdrop=0.0,
        pad_token_id=0,
    )
    decoder = BartDecoder(config)
    decoder.embed_tokens = None  # type: ignore[assignment]  # never used: inputs_embeds come from the encoder's embeddings
    return decoder


# ----------------------------------------------------------------------------------------------
# data: duplicate and mask


def mask_phrase_tokens(
    input_ids: torch.Tensor, offsets: torch.Tensor, spans: list[tuple[int, int]], mask_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace every token whose character span overlaps a phrase span by ``mask_id``.

    ``offsets`` is the fast tokenizer's ``offset_mapping`` of one row ((0, 0) for special and
    padding tokens, which are never masked). Returns the masked ids and the boolean mask.
    """
    starts, ends = offsets[:, 0], offsets[:, 1]
    hit = torch.zeros_like(input_ids, dtype=torch.bool)
    real = ends > starts
    for a, b in spans:
        hit |= real & (starts < b) & (ends > a)
    return torch.where(hit, torch.full_like(input_ids, mask_id), input_ids), hit


def mlm_mask(
    input_ids: torch.Tensor, special: torch.Tensor, probability: float, mask_id: int, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: ``probability`` of the non-special tokens are predicted; of those 80% become
    the mask token, 10% a random token (half of the remaining 20%, as SimCSE/PaSeR), 10% stay."""
    labels = input_ids.clone()
    chosen = torch.bernoulli(torch.full(labels.shape, probability)).bool() & ~special
    labels[~chosen] = -100
    inputs = input_ids.clone()
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & chosen
    inputs[replaced] = mask_id
    randomised = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & chosen & ~replaced
    inputs[randomised] = torch.randint(vocab_size, labels.shape, dtype=torch.long)[randomised]
    return inputs, labels


def nli_triples(pairs) -> list[tuple[str, str, str]]:
    """(anchor, entailment, contradiction) triples, SimCSE's supervised format: per premise, its
    entailment hypotheses zipped in order with its contradiction hypotheses (which regroups the
    rows of ``nli_for_simcse.csv`` exactly); premises lacking either are skipped."""
    from benchharness.training.train_data import NLI_LABELS

    entail, contra = NLI_LABELS.index("entailment"), NLI_LABELS.index("contradiction")
    by_premise: dict[str, tuple[list[str], list[str]]] = {}
    for p in pairs:
        if p.label in (entail, contra):
            slot = by_premise.setdefault(p.premise, ([], []))
            slot[0 if p.label == entail else 1].append(p.hypothesis)
    return [(premise, e, c) for premise, (es, cs) in by_premise.items() for e, c in zip(es, cs)]


@dataclass(frozen=True)
class PaSeROptions(TrainingOptions):
    pooling: str = option(
        "cls_before_pooler",
        "training pooling (paper: cls_before_pooler); evaluation uses it too unless --eval-pooling is given",
        choices=TRAIN_POOLINGS,
    )
    top_k: int = option(3, "RAKE phrases masked per sentence (paper: 3)", parse=positive_int)
    augment: str = option("sr", "EDA augmentation (paper: sr = synonym replacement)", choices=AUGMENTATIONS)
    augment_ratio: float = option(0.5, "EDA ratio alpha (official data: 0.5)", parse=probability)
    signal: str = option("paper", "decoding signal: the paper's or the official code's", choices=SIGNALS)
    m: float = option(10.0, "paper signal: weight of |Es-Es~| (paper: 10)", parse=non_negative_float)
    n: float = option(10.0, "paper signal: weight of |Es*Es~| (paper: 10)", parse=non_negative_float)
    t: float = option(1.0, "official signal: weight of z1*Wz2 (code: 1)", parse=non_negative_float)
    k: float = option(1.0, "official signal: weight of z1-Wz2 (code: 1)", parse=non_negative_float)
    decoder_layers: int = option(6, "transformer decoder depth (paper: 6)", parse=positive_int)
    decoder_heads: int = option(16, "decoder attention heads (official: 16)", parse=positive_int)
    mlm_weight: float = option(1.0, "weight of the MLM loss (paper: 1)", parse=non_negative_float)
    mlm_probability: float = option(0.15, "MLM masking rate (0.15)", parse=fraction)
    supervised: bool = option(
        False,
        "supervised PaSeR: --data is NLI (SimCSE csv, SNLI/MNLI jsonl); start from a PaSeR run",
        recorded="when-set",
    )
    alpha: float = option(
        0.1, "supervised: weight of the generative loss", parse=non_negative_float, recorded="when-set"
    )
    temperature: float = option(
        0.05, "supervised: contrastive temperature (0.05)", parse=positive_float, recorded="when-set"
    )

    def sentence_data(self) -> str | None:
        if not self.supervised:
            return None
        return "supervised PaSeR trains on NLI triples, not sentences: pass data=<SimCSE nli .csv or SNLI/MNLI .jsonl>"


# ----------------------------------------------------------------------------------------------
# the method


class PaSeR(TrainingMethod):
    method_name = "paser"
    options_class, presets, default_preset = PaSeROptions, PRESETS, "cpu"
    in_batch_negatives = True  # the supervised variant's contrastive loss

    def __init__(
        self,
        encoder: PreTrainedModel,
        tokenizer,
        options: PaSeROptions | None = None,
        *,
        checkpoint: Path | None = None,
        data_root: str | None = None,
    ) -> None:
        """The options' module; ``checkpoint``: the base's folder, whose MLM head (if any) the LM head
        starts from; ``data_root``: where the stopwords and WordNet are read (the configured root)."""
        super().__init__(encoder, tokenizer)
        o = options or PaSeROptions()
        if not getattr(tokenizer, "is_fast", False):
            raise InvalidInputError("PaSeR needs a fast tokenizer (character offsets locate the phrase tokens)")
        if tokenizer.mask_token_id is None:
            raise InvalidInputError("PaSeR needs a tokenizer with a mask token")
        self.eval_pooling = self.pooling = o.pooling
        self.max_length, self.top_k = o.max_length, o.top_k
        self.stopwords = english_stopwords(data_root)
        self.augmenter = Augmenter(o.augment, o.augment_ratio, data_root)
        self.mlm_weight, self.mlm_probability = o.mlm_weight, o.mlm_probability
        self.supervised, self.alpha, self.temperature = o.supervised, o.alpha, o.temperature
        config = encoder.config
        hidden = config.hidden_size
        std = getattr(config, "initializer_range", 0.02)
        self.signal = DecodingSignal(o.signal, hidden, o.m, o.n, o.t, o.k, init_std=std)
        self.decoder = build_decoder(hidden, o.decoder_layers, o.decoder_heads, len(tokenizer))
        self.decoder_layers, self.decoder_heads = o.decoder_layers, o.decoder_heads
        self.lm_head = LMHead(config, encoder.get_input_embeddings())
        loaded = checkpoint is not None and self.lm_head.load_from_checkpoint(checkpoint)
        self.mlm_head_note = (
            "initialised from the checkpoint's MLM head (cls.predictions)"
            if loaded
            else "initialised randomly: checkpoint has none"
        )
        self.start_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.end_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id

    @classmethod
    def build(cls, options: Any, base: Base, data: DataRoot) -> PaSeR:
        """The module, its LM head from the base's MLM head, its stopwords and WordNet from ``data``."""
        return cls(base.encoder, base.tokenizer, options, checkpoint=base.source.path, data_root=str(data.root))

    # -- data ----------------------------------------------------------------------------------

    def decoder_embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        """The encoder's embedding module on decoder inputs (the official code's ``embed_tokens``)."""
        embeddings = getattr(self.encoder, "embeddings", None)
        if embeddings is not None:
            return embeddings(input_ids=ids)
        return self.encoder.get_input_embeddings()(ids)

    def pair(self, sentence: str, rng: random.Random) -> dict[str, Any]:
        """One training pair before batching: augmented text, its top-k phrases, their spans."""
        text = self.augmenter(sentence, rng) if self.augmenter.kind != "none" else sentence
        phrases = rake(text, self.stopwords, self.top_k)
        spans = [span for p in phrases for span in p.spans]
        firsts = sorted(p.spans[0] for p in phrases)
        target = " ".join(text[a:b] for a, b in firsts)
        return {"text": text, "spans": spans, "target": target}

    def collate(self, examples: list[Any]) -> dict[str, Any]:
        # a per-batch RNG drawn from torch's global generator, which the loop seeds and checkpoints
        rng = random.Random(int(torch.randint(2**31 - 1, (1,))))
        anchors = [ex[0] for ex in examples] if self.supervised else list(examples)
        pairs = [self.pair(s, rng) for s in anchors]
        tok = self.tokenizer
        enc = tok(
            [p["text"] for p in pairs],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
            return_tensors="pt",
        )
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        masked = ids.clone()
        usable = torch.zeros(len(pairs), dtype=torch.bool)
        for i, p in enumerate(pairs):
            masked[i], hit = mask_phrase_tokens(ids[i], offsets[i], p["spans"], tok.mask_token_id)
            # official collator: only pairs shorter than max_length tokens are decoded
            usable[i] = bool(hit.any()) and int(enc["attention_mask"][i].sum()) < self.max_length
        targets = tok(
            [p["target"] for p in pairs], add_special_tokens=False, truncation=True, max_length=self.max_length - 1
        )["input_ids"]
        width = max(len(t) for t in targets) + 1
        dec_in = torch.full((len(pairs), width), tok.pad_token_id, dtype=torch.long)
        dec_labels = torch.full((len(pairs), width), -100, dtype=torch.long)
        for i, t in enumerate(targets):
            if usable[i] and t:
                dec_in[i, : len(t) + 1] = torch.tensor([self.start_id, *t])
                dec_labels[i, : len(t) + 1] = torch.tensor([*t, self.end_id])
        special = enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0)
        mlm_ids, mlm_labels = mlm_mask(ids, special, self.mlm_probability, tok.mask_token_id, len(tok))
        batch = {
            "input_ids": torch.cat([ids, masked]),
            "attention_mask": enc["attention_mask"].repeat(2, 1),
            "mlm_input_ids": mlm_ids,
            "mlm_labels": mlm_labels,
            "decoder_input_ids": dec_in,
            "decoder_labels": dec_labels,
        }
        if "token_type_ids" in enc:
            batch["token_type_ids"] = enc["token_type_ids"].repeat(2, 1)
        if self.supervised:
            other = tok(
                [ex[1] for ex in examples] + [ex[2] for ex in examples],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            batch["nli"] = dict(other)
        return batch

    # -- loss ----------------------------------------------------------------------------------

    def embed(self, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = self.encoder(**enc, output_hidden_states=needs_hidden_states(self.pooling))
        return self.sized(pool(self.pooling, outputs, enc["attention_mask"]))

    def decoder_loss(
        self, z1: torch.Tensor, z2: torch.Tensor, dec_in: torch.Tensor, dec_labels: torch.Tensor
    ) -> torch.Tensor:
        """Teacher-forced cross-entropy of the phrase tokens given the signal (0 if none to decode)."""
        memory = self.signal(z1, z2)
        hidden = self.decoder(
            inputs_embeds=self.decoder_embeddings(dec_in),
            encoder_hidden_states=memory,
            encoder_attention_mask=torch.ones(memory.shape[:2], device=memory.device, dtype=torch.long),
        ).last_hidden_state
        keep = dec_labels != -100
        if not keep.any():
            loss = hidden.sum() * 0.0
        else:  # logits only where there is a label: the same loss as the full softmax with ignore_index
            loss = F.cross_entropy(self.lm_head(hidden[keep]).float(), dec_labels[keep])
        return data_parallel.global_mean(loss, int(keep.sum()))  # a mean over every process's tokens

    def mlm_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        n = batch["mlm_input_ids"].shape[0]
        enc = {"input_ids": batch["mlm_input_ids"], "attention_mask": batch["attention_mask"][:n]}
        if "token_type_ids" in batch:
            enc["token_type_ids"] = batch["token_type_ids"][:n]
        keep = batch["mlm_labels"] != -100
        hidden = self.encoder(**enc).last_hidden_state
        if not keep.any():
            loss = hidden.sum() * 0.0
        else:
            loss = F.cross_entropy(self.lm_head(hidden[keep]).float(), batch["mlm_labels"][keep])
        return data_parallel.global_mean(loss, int(keep.sum()))  # a mean over every process's tokens

    def forward(self, batch: dict[str, Any]) -> LossOutput:
        keys = ("input_ids", "attention_mask", "token_type_ids")
        z = self.embed({k: batch[k] for k in keys if k in batch})
        n = z.shape[0] // 2
        z1, z2 = z[:n], z[n:]
        dec = self.decoder_loss(z1, z2, batch["decoder_input_ids"], batch["decoder_labels"])
        logs = {"decoder_ce": float(dec.detach())}
        loss = self.alpha * dec if self.supervised else dec
        if self.mlm_weight > 0:
            mlm = self.mlm_loss(batch)
            logs["mlm_ce"] = float(mlm.detach())
            loss = loss + self.mlm_weight * mlm
        if self.supervised:
            other = self.embed(batch["nli"])
            # the other processes' positives and hard negatives, if any (data_parallel.in_batch)
            (anchor, _, _), (_, positive, negative), offset = data_parallel.in_batch(z1, other[:n], other[n:])
            con = supervised_contrastive(anchor, positive, negative, self.temperature, offset)
            logs["contrastive"] = float(con.detach())
            loss = loss + con
        return LossOutput(loss, logs)

    def size(self, batch: Any, examples: list[Any]) -> int:
        return len(examples)

    def hyperparameters(self) -> dict[str, Any]:
        hp = {
            "pooling": self.pooling,
            "phrases": f"RAKE top-{self.top_k} (NLTK English stopwords)",
            "top_k": self.top_k,
            "augment": {"kind": self.augmenter.kind, "ratio": self.augmenter.alpha},
            "signal": self.signal.describe(),
            "decoder": {
                "type": "BartDecoder",
                "layers": self.decoder_layers,
                "heads": self.decoder_heads,
                "ffn_dim": self.encoder.config.hidden_size,
                "token_embeddings": "the encoder's embedding module (shared)",
            },
            "lm_head": "shared by decoder and MLM; untied output matrix (a parameter of its own, trained "
            f"separately, as the official code), initialised as {self.lm_head.output_note}",
            "mlm_head": self.mlm_head_note,
            "mlm_weight": self.mlm_weight,
            "mlm_probability": self.mlm_probability,
            "decoder_target": "chosen phrases in sentence order, space-joined, + [SEP]; pairs reaching "
            "max_length tokens are not decoded (official collator)",
            "loss": "decoder CE + mlm_weight * MLM CE",
        }
        if self.supervised:
            hp.update(
                {
                    "supervised": True,
                    "alpha": self.alpha,
                    "temperature": self.temperature,
                    "loss": "SimCSE supervised contrastive + alpha * decoder CE + mlm_weight * MLM CE",
                }
            )
        return hp


def supervised_contrastive(
    anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, temperature: float, offset: int = 0
) -> torch.Tensor:
    """SimCSE's supervised loss: anchor i against all positives and all hard negatives (2N columns),
    the target is positive ``offset + i`` (``offset``: where this process's rows start among the
    gathered positives of a data-parallel run)."""
    sim = torch.cat(
        [
            F.cosine_similarity(anchor.unsqueeze(1), positive.unsqueeze(0), dim=-1),
            F.cosine_similarity(anchor.unsqueeze(1), negative.unsqueeze(0), dim=-1),
        ],
        dim=1,
    )
    return F.cross_entropy((sim / temperature).float(), torch.arange(anchor.shape[0], device=anchor.device) + offset)
