"""ConSERT as a training method: unsupervised on sentences, or supervised and joint on NLI pairs (the
module and its options: ``model.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchharness.training.method import Examples, Method, TrainingData, sentences
from benchharness.training.methods.consert.model import ConSERT, ConSERTOptions
from benchharness.training.train_data import load_nli


def adjust(record: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """A view chosen by the caller takes its own paper rate, not the preset's."""
    for i in ("1", "2"):
        if f"view{i}" in given and f"rate{i}" not in given:
            record[f"rate{i}"] = None
    return record


def examples(options: ConSERTOptions, data: TrainingData) -> Examples:
    """Sentences, or NLI pairs for the supervised and joint objectives."""
    if options.objective == "unsup":
        return sentences(options, data)
    pairs = load_nli(options.data, data.root)
    return Examples(pairs, {"name": options.data, "kind": "NLI pairs", "n_examples": len(pairs)})


METHOD = Method.of(
    ConSERT,
    help="ConSERT: NT-Xent between views made by token shuffle, token/feature cutoff or dropout",
    title="ConSERT",
    examples=examples,
    adjust=adjust,
)
