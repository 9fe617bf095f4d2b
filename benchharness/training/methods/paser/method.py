"""PaSeR as a training method: unsupervised on sentences, or supervised on NLI triples (the module and
its options: ``model.py``)."""

from __future__ import annotations

from pathlib import Path

from benchharness.core.data_root import DataRoot
from benchharness.training.method import Examples, Method, TrainingData, sentences
from benchharness.training.methods.paser.model import PaSeR, PaSeROptions, nli_triples
from benchharness.training.train_data import load_nli


def examples(options: PaSeROptions, data: TrainingData) -> Examples:
    """Sentences, or NLI triples (anchor, entailment, contradiction) whose files may be named
    relative to the data root."""
    if not options.supervised:
        return sentences(options, data)
    triples = nli_triples(load_nli(nli_spec(options.data, data.root), data.root))
    kind = "NLI triples (anchor, entailment, contradiction)"
    return Examples(triples, {"name": options.data, "kind": kind, "n_examples": len(triples)})


def nli_spec(spec: str, data: DataRoot) -> str:
    """``spec`` with its files named relative to the data root made full paths where they exist there."""
    root = data.root
    return "+".join(
        p if Path(p).expanduser().exists() or ":" in p or not (root / p).exists() else str(root / p)
        for p in spec.split("+")
    )


METHOD = Method.of(
    PaSeR,
    help="PaSeR: reconstruct a sentence's top RAKE phrases from its embedding and its phrase-masked copy's, + MLM",
    title="PaSeR",
    examples=examples,
)
