"""``benchharness train consert``: ConSERT, unsupervised on sentences or supervised/joint on NLI."""

from __future__ import annotations

import argparse
from typing import Any

from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import fraction, non_negative_float, positive_float
from benchharness.core.seeding import seed_everything
from benchharness.encoders.methods.base_model import load_base
from benchharness.encoders.methods.consert.model import AUGMENTATIONS, OBJECTIVES, PRESETS, ConSERT
from benchharness.encoders.methods.launch import DevFactory, preflight, report, train_with_dev
from benchharness.encoders.methods.train_config import add_training_arguments, config_from_options, resolve_options
from benchharness.encoders.methods.train_data import load_nli, load_sentences

HELP = "ConSERT: NT-Xent between views made by token shuffle, token/feature cutoff or dropout"

DEFAULT_PRESET = "unsup-cpu"
#: settings no preset gives (the paper's)
DEFAULTS = {"temperature": 0.1, "cl_rate": 0.15, "view1": "feature_cutoff", "view2": "shuffle", "objective": "unsup"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser, PRESETS, DEFAULT_PRESET)
    g = parser.add_argument_group("ConSERT")
    g.add_argument(
        "--objective",
        choices=OBJECTIVES,
        help="unsup (sentences), sup or joint (NLI pairs; --data a "
        "SNLI/MNLI .jsonl, SimCSE .csv or senteval-snli:<split>)",
    )
    g.add_argument("--view1", choices=AUGMENTATIONS)
    g.add_argument("--rate1", type=fraction, help="cutoff/dropout rate of view 1 (default: the paper's)")
    g.add_argument("--view2", choices=AUGMENTATIONS)
    g.add_argument("--rate2", type=fraction)
    g.add_argument("--temperature", type=positive_float, help="NT-Xent temperature (paper: 0.1)")
    g.add_argument("--cl-rate", type=non_negative_float, help="weight of the contrastive loss (paper: 0.15)")
    g.add_argument("--no-dropout", action="store_true", default=None, help="turn off the encoder's dropout")
    g.add_argument(
        "--dropout", dest="no_dropout", action="store_false", default=None, help="keep the encoder's dropout"
    )
    g.add_argument(
        "--max-square",
        action="store_true",
        default=None,
        help="add max(u,v)^2 to the classifier features (the reference scripts do)",
    )
    g.add_argument(
        "--train-pooling",
        choices=["avg", "avg_top2", "avg_first_last", "cls_before_pooler"],
        help="pooling during training (ConSERT: avg)",
    )


def options(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting of the run the flags describe (defaults < preset < flags)."""
    opts = resolve_options(args, PRESETS, DEFAULTS, DEFAULT_PRESET)
    for i in ("1", "2"):  # a view chosen on the command line takes its own paper rate, not the preset's
        if getattr(args, f"view{i}") is not None and getattr(args, f"rate{i}") is None:
            opts[f"rate{i}"] = None
    if opts["objective"] != "unsup" and opts.get("data") in (None, "sts-unlabeled"):
        raise InvalidInputError(
            f"ConSERT {opts['objective']} trains on NLI pairs: pass --data (SNLI/MNLI .jsonl, "
            "SimCSE nli .csv, or senteval-snli:<split>)"
        )
    return opts


def main(args: argparse.Namespace, dev: DevFactory | None = None) -> int:
    opts = options(args)
    config = config_from_options(opts)
    if opts["objective"] == "unsup":
        examples: list[Any] = load_sentences(config.data)
        data = {"name": config.data, "kind": "unlabeled sentences", "n_examples": len(examples)}
    else:
        examples = load_nli(config.data)
        data = {"name": config.data, "kind": "NLI pairs", "n_examples": len(examples)}
    if config.limit:
        examples = examples[: config.limit]
        data["limit"] = config.limit
    preflight(config, len(examples))
    seed_everything(config.seed)  # training-only heads are drawn at construction
    encoder, tokenizer, source = load_base(config.base)
    method = ConSERT(
        encoder,
        tokenizer,
        objective=opts["objective"],
        view1=opts["view1"],
        rate1=opts.get("rate1"),
        view2=opts["view2"],
        rate2=opts.get("rate2"),
        temperature=opts["temperature"],
        cl_rate=opts["cl_rate"],
        max_length=config.max_length,
        no_dropout=bool(opts.get("no_dropout")),
        train_pooling=opts.get("train_pooling", "avg"),
        max_square=bool(opts.get("max_square")),
    )
    return report(train_with_dev(method, examples, config, data, source, dev))


def count_examples(options: dict[str, Any]) -> int:
    """Training examples per epoch (sentences, or NLI pairs for sup and joint), for the time
    estimate of ``benchharness run``."""
    if options.get("objective", "unsup") != "unsup":
        return len(load_nli(options["data"]))
    return len(load_sentences(options["data"]))
