"""``benchharness train paser``: PaSeR, unsupervised on sentences or supervised on NLI triples."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchharness.core.data_root import DataRoot
from benchharness.core.flag_types import fraction, non_negative_float, positive_float, positive_int, probability
from benchharness.core.seeding import seed_everything
from benchharness.encoders.methods.base_model import load_base
from benchharness.encoders.methods.launch import DevFactory, preflight, report, train_with_dev
from benchharness.encoders.methods.paser.eda import AUGMENTATIONS
from benchharness.encoders.methods.paser.model import PRESETS, SIGNALS, TRAIN_POOLINGS, PaSeR, nli_triples
from benchharness.encoders.methods.train_config import add_training_arguments, config_from_options, resolve_options
from benchharness.encoders.methods.train_data import load_nli, load_sentences

HELP = "PaSeR: reconstruct a sentence's top RAKE phrases from its embedding and its phrase-masked copy's, + MLM"
DEFAULT_PRESET = "cpu"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser, PRESETS, DEFAULT_PRESET)
    g = parser.add_argument_group("PaSeR")
    g.add_argument(
        "--pooling",
        choices=TRAIN_POOLINGS,
        help="training pooling (paper: cls_before_pooler); evaluation uses it too unless --eval-pooling is given",
    )
    g.add_argument("--top-k", type=positive_int, help="RAKE phrases masked per sentence (paper: 3)")
    g.add_argument("--augment", choices=AUGMENTATIONS, help="EDA augmentation (paper: sr = synonym replacement)")
    g.add_argument("--augment-ratio", type=probability, help="EDA ratio alpha (official data: 0.5)")
    g.add_argument("--signal", choices=SIGNALS, help="decoding signal: the paper's or the official code's")
    g.add_argument("--m", type=non_negative_float, help="paper signal: weight of |Es-Es~| (paper: 10)")
    g.add_argument("--n", type=non_negative_float, help="paper signal: weight of |Es*Es~| (paper: 10)")
    g.add_argument("--t", type=non_negative_float, help="official signal: weight of z1*Wz2 (code: 1)")
    g.add_argument("--k", type=non_negative_float, help="official signal: weight of z1-Wz2 (code: 1)")
    g.add_argument("--decoder-layers", type=positive_int, help="transformer decoder depth (paper: 6)")
    g.add_argument("--decoder-heads", type=positive_int, help="decoder attention heads (official: 16)")
    g.add_argument("--mlm-weight", type=non_negative_float, help="weight of the MLM loss (paper: 1)")
    g.add_argument("--mlm-probability", type=fraction, help="MLM masking rate (0.15)")
    g.add_argument(
        "--supervised",
        action="store_true",
        default=None,
        help="supervised PaSeR: --data is NLI (SimCSE csv, SNLI/MNLI jsonl); start from a PaSeR run",
    )
    g.add_argument("--alpha", type=non_negative_float, help="supervised: weight of the generative loss")
    g.add_argument("--temperature", type=positive_float, help="supervised: contrastive temperature (0.05)")


def load_examples(spec: str, supervised: bool) -> tuple[list[Any], dict[str, Any]]:
    """Sentences, or NLI triples whose files may be named relative to the data root."""
    if not supervised:
        sentences = load_sentences(spec)
        return sentences, {"name": spec, "kind": "unlabeled sentences", "n_examples": len(sentences)}
    root = DataRoot().root
    parts = [
        p if Path(p).expanduser().exists() or ":" in p or not (root / p).exists() else str(root / p)
        for p in spec.split("+")
    ]
    triples = nli_triples(load_nli("+".join(parts)))
    return triples, {
        "name": spec,
        "kind": "NLI triples (anchor, entailment, contradiction)",
        "n_examples": len(triples),
    }


def options(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting of the run the flags describe (defaults < preset < flags)."""
    return resolve_options(args, PRESETS, default_preset=DEFAULT_PRESET)


def main(args: argparse.Namespace, dev: DevFactory | None = None) -> int:
    opts = options(args)
    config = config_from_options(opts)
    supervised = bool(opts.get("supervised"))
    examples, data = load_examples(opts["data"], supervised)
    if config.limit:
        examples = examples[: config.limit]
        data["n_examples"] = len(examples)
    preflight(config, len(examples))
    seed_everything(config.seed)  # the decoder, signal and LM heads are drawn at construction
    encoder, tokenizer, source = load_base(config.base)
    method = PaSeR(
        encoder,
        tokenizer,
        pooling=opts["pooling"],
        max_length=config.max_length,
        top_k=opts["top_k"],
        augment=opts["augment"],
        augment_ratio=opts["augment_ratio"],
        signal=opts["signal"],
        m=opts["m"],
        n=opts["n"],
        t=opts["t"],
        k=opts["k"],
        decoder_layers=opts["decoder_layers"],
        decoder_heads=opts["decoder_heads"],
        mlm_weight=opts["mlm_weight"],
        mlm_probability=opts["mlm_probability"],
        supervised=supervised,
        alpha=opts.get("alpha", 0.1),
        temperature=opts.get("temperature", 0.05),
        checkpoint=source.path,
    )
    return report(train_with_dev(method, examples, config, data, source, dev))


def count_examples(options: dict[str, Any]) -> int:
    """Training examples per epoch, for the time estimate of ``benchharness run``."""
    return len(load_examples(options["data"], bool(options.get("supervised")))[0])
