"""``benchharness train simcse``: unsupervised SimCSE on a sentence corpus."""

from __future__ import annotations

import argparse
from typing import Any

from benchharness.core.flag_types import positive_float
from benchharness.core.seeding import seed_everything
from benchharness.encoders.methods.base_model import load_base
from benchharness.encoders.methods.launch import DevFactory, preflight, report, train_with_dev
from benchharness.encoders.methods.simcse.model import PRESETS, SimCSE
from benchharness.encoders.methods.train_config import add_training_arguments, config_from_options, resolve_options
from benchharness.encoders.methods.train_data import load_sentences

HELP = "unsupervised SimCSE: dropout views of the same sentence, InfoNCE at temperature 0.05"
DEFAULT_PRESET = "cpu"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_training_arguments(parser, PRESETS, DEFAULT_PRESET)
    g = parser.add_argument_group("SimCSE")
    g.add_argument("--temperature", type=positive_float, help="InfoNCE temperature (paper: 0.05)")


def options(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting of the run the flags describe (defaults < preset < flags)."""
    return resolve_options(args, PRESETS, default_preset=DEFAULT_PRESET)


def main(args: argparse.Namespace, dev: DevFactory | None = None) -> int:
    opts = options(args)
    config = config_from_options(opts)
    sentences = load_sentences(config.data)
    data: dict[str, Any] = {"name": config.data, "kind": "unlabeled sentences", "n_examples": len(sentences)}
    if config.limit:
        sentences = sentences[: config.limit]
        data["limit"] = config.limit
    preflight(config, len(sentences))
    seed_everything(config.seed)  # training-only heads are drawn at construction
    encoder, tokenizer, source = load_base(config.base)
    method = SimCSE(encoder, tokenizer, temperature=opts["temperature"], max_length=config.max_length)
    return report(train_with_dev(method, sentences, config, data, source, dev))


def count_examples(options: dict[str, Any]) -> int:
    """Training sentences per epoch, for the time estimate of ``benchharness run``."""
    return len(load_sentences(options["data"]))
