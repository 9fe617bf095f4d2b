"""ConSERT as a training method: unsupervised on sentences, or supervised and joint on NLI pairs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import fraction, non_negative_float, positive_float
from benchharness.training.launch import base_model, limited, preflight, run_method, training_sentences
from benchharness.training.method import Method, TrainedRun, TrainingContext
from benchharness.training.methods.consert.model import AUGMENTATIONS, OBJECTIVES, PRESETS, ConSERT
from benchharness.training.options import TrainingOptions, option
from benchharness.training.train_data import load_nli, load_sentences

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


def adjust(record: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """A view chosen by the caller takes its own paper rate, not the preset's."""
    for i in ("1", "2"):
        if f"view{i}" in given and f"rate{i}" not in given:
            record[f"rate{i}"] = None
    return record


def train(options: ConSERTOptions, context: TrainingContext) -> list[TrainedRun]:
    examples: list[Any]
    if options.objective == "unsup":
        examples, data = training_sentences(options, context)
    else:
        examples = load_nli(options.data, context.data)
        examples, data = limited(
            examples, {"name": options.data, "kind": "NLI pairs", "n_examples": len(examples)}, options
        )
    preflight(options, context, len(examples))
    encoder, tokenizer, source = base_model(options, context)  # training-only heads are drawn at construction
    method = ConSERT(
        encoder,
        tokenizer,
        objective=options.objective,
        view1=options.view1,
        rate1=options.rate1,
        view2=options.view2,
        rate2=options.rate2,
        temperature=options.temperature,
        cl_rate=options.cl_rate,
        max_length=options.max_length,
        no_dropout=options.no_dropout,
        train_pooling=options.train_pooling,
        max_square=options.max_square,
    )
    return [run_method(method, examples, options, context, data, source)]


def count_examples(options: ConSERTOptions, data: DataRoot) -> int:
    """Training examples per epoch (sentences, or NLI pairs for sup and joint)."""
    if options.objective != "unsup":
        return len(load_nli(options.data, data))
    return len(load_sentences(options.data, data))


METHOD = Method(
    name="consert",
    help="ConSERT: NT-Xent between views made by token shuffle, token/feature cutoff or dropout",
    title="ConSERT",
    options=ConSERTOptions,
    train=train,
    count_examples=count_examples,
    presets=PRESETS,
    default_preset="unsup-cpu",
    adjust=adjust,
)
