"""SimCSE as a training method: unsupervised, on sentences (the module and its options: ``model.py``)."""

from __future__ import annotations

from benchharness.training.method import Method, sentences
from benchharness.training.methods.simcse.model import PRESETS, SimCSE, SimCSEOptions

METHOD = Method(
    name="simcse",
    help="unsupervised SimCSE: dropout views of the same sentence, InfoNCE at temperature 0.05",
    title="SimCSE",
    options=SimCSEOptions,
    examples=sentences,
    build=SimCSE.build,
    presets=PRESETS,
    default_preset="cpu",
)
