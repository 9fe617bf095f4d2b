"""PaSeR as a training method: unsupervised on sentences, or supervised on NLI triples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchharness.core.data_root import DataRoot
from benchharness.core.flag_types import fraction, non_negative_float, positive_float, positive_int, probability
from benchharness.training.launch import base_model, preflight, run_method, training_sentences
from benchharness.training.method import Method, TrainedRun, TrainingContext
from benchharness.training.methods.paser.eda import AUGMENTATIONS
from benchharness.training.methods.paser.model import PRESETS, SIGNALS, TRAIN_POOLINGS, PaSeR, nli_triples
from benchharness.training.options import TrainingOptions, option
from benchharness.training.train_data import load_nli, load_sentences


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


def load_examples(options: PaSeROptions, context: TrainingContext) -> tuple[list[Any], dict[str, Any]]:
    """Sentences, or NLI triples whose files may be named relative to the data root; cut to
    ``options.limit`` (the record counts what is trained on)."""
    examples: list[Any]
    if not options.supervised:
        examples, data = training_sentences(options, context)
        data.pop("limit", None)
    else:
        examples = nli_triples(load_nli(nli_spec(options.data, context.data), context.data))
        data = {
            "name": options.data,
            "kind": "NLI triples (anchor, entailment, contradiction)",
            "n_examples": len(examples),
        }
    if options.limit:
        examples = examples[: options.limit]
    data["n_examples"] = len(examples)
    return examples, data


def nli_spec(spec: str, data: DataRoot) -> str:
    """``spec`` with its files named relative to the data root made full paths where they exist there."""
    root = data.root
    return "+".join(
        p if Path(p).expanduser().exists() or ":" in p or not (root / p).exists() else str(root / p)
        for p in spec.split("+")
    )


def train(options: PaSeROptions, context: TrainingContext) -> list[TrainedRun]:
    examples, data = load_examples(options, context)
    preflight(options, context, len(examples))
    encoder, tokenizer, source = base_model(options, context)  # the decoder, signal and LM heads are drawn next
    method = PaSeR(
        encoder,
        tokenizer,
        pooling=options.pooling,
        max_length=options.max_length,
        top_k=options.top_k,
        augment=options.augment,
        augment_ratio=options.augment_ratio,
        signal=options.signal,
        m=options.m,
        n=options.n,
        t=options.t,
        k=options.k,
        decoder_layers=options.decoder_layers,
        decoder_heads=options.decoder_heads,
        mlm_weight=options.mlm_weight,
        mlm_probability=options.mlm_probability,
        supervised=options.supervised,
        alpha=options.alpha,
        temperature=options.temperature,
        checkpoint=source.path,
        data_root=str(context.data.root),
    )
    return [run_method(method, examples, options, context, data, source)]


def count_examples(options: PaSeROptions, data: DataRoot) -> int:
    """Training examples per epoch."""
    if options.supervised:
        return len(nli_triples(load_nli(nli_spec(options.data, data), data)))
    return len(load_sentences(options.data, data))


METHOD = Method(
    name="paser",
    help="PaSeR: reconstruct a sentence's top RAKE phrases from its embedding and its phrase-masked copy's, + MLM",
    title="PaSeR",
    options=PaSeROptions,
    train=train,
    count_examples=count_examples,
    presets=PRESETS,
    default_preset="cpu",
)
