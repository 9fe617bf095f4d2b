"""SimCSE as a training method: its options, presets and ``train``."""

from __future__ import annotations

from dataclasses import dataclass

from benchharness.core.data_root import DataRoot
from benchharness.core.flag_types import positive_float
from benchharness.training.launch import base_model, preflight, run_method, training_sentences
from benchharness.training.method import Method, TrainedRun, TrainingContext
from benchharness.training.methods.simcse.model import PRESETS, SimCSE
from benchharness.training.options import TrainingOptions, option
from benchharness.training.train_data import load_sentences


@dataclass(frozen=True)
class SimCSEOptions(TrainingOptions):
    temperature: float = option(0.05, "InfoNCE temperature (paper: 0.05)", parse=positive_float)


def train(options: SimCSEOptions, context: TrainingContext) -> list[TrainedRun]:
    sentences, data = training_sentences(options, context)
    preflight(options, context, len(sentences))
    encoder, tokenizer, source = base_model(options, context)  # the MLP is drawn at construction
    method = SimCSE(encoder, tokenizer, temperature=options.temperature, max_length=options.max_length)
    return [run_method(method, sentences, options, context, data, source)]


def count_examples(options: SimCSEOptions, data: DataRoot) -> int:
    """Training sentences per epoch, for the time estimate of on-demand training."""
    return len(load_sentences(options.data, data))


METHOD = Method(
    name="simcse",
    help="unsupervised SimCSE: dropout views of the same sentence, InfoNCE at temperature 0.05",
    title="SimCSE",
    options=SimCSEOptions,
    train=train,
    count_examples=count_examples,
    presets=PRESETS,
    default_preset="cpu",
)
