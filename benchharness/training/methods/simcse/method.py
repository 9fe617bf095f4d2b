"""SimCSE as a training method: unsupervised, on sentences (the module and its options: ``model.py``)."""

from __future__ import annotations

from benchharness.training.method import Method, sentences
from benchharness.training.methods.simcse.model import SimCSE

METHOD = Method.of(
    SimCSE,
    help="unsupervised SimCSE: dropout views of the same sentence, InfoNCE at temperature 0.05",
    title="SimCSE",
    examples=sentences,
)
