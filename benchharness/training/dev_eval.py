"""STS-B dev evaluation of an encoder while it trains, scored exactly as the harness scores it.

The training loop (``benchharness.encoders.methods.loop``) knows no task: ``benchharness train``
builds a :class:`DevEvaluator` here and hands it to the loop as a callback. The evaluator encodes
through the one inference engine (``benchharness.encoders.inference``: exact token-length batches)
with the pooling and truncation the registered encoder will use, and hands the task the runner's
embedding store, so the dev score in a manifest is the score ``benchharness run`` reproduces for
the saved encoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.devices import check_precision, pick_device
from benchharness.core.errors import InvalidInputError
from benchharness.encoders.inference import TOKENS_PER_SENTENCE, TransformerEngine, tokenize
from benchharness.encoders.pooling import needs_hidden_states, pool
from benchharness.evaluation.runner import EmbeddingStore

if TYPE_CHECKING:
    from benchharness.encoders.methods.method import TrainingMethod
    from benchharness.encoders.methods.train_config import TrainConfig

#: the one dev task training selects on (model selection must never see a test split)
DEV_TASK = "STSBenchmark-dev"


class DevEvaluator:
    """The dev score of an encoder module (STS-B dev Spearman by default), computed as the harness
    would: the task's unique sentences tokenized once, encoded by the engine in eval mode, pooled
    with the registered encoder's pooling, and scored by the task's own ``evaluate``."""

    def __init__(self, tokenizer: Any, pooling: str, max_length: int, batch_size: int, device: torch.device,
                 precision: str, task_name: str = DEV_TASK, data: DataRoot | None = None) -> None:
        if pooling == "prompt":
            raise InvalidInputError("dev evaluation with pooling 'prompt' is not supported by the training loop")
        self.task_name = task_name
        self.task = tasks.get(task_name)
        self.task.load(data or DataRoot())
        self.sentences = list(dict.fromkeys(self.task.sentences()))
        self.tokenizer, self.pooling, self.max_length = tokenizer, pooling, max_length
        self.device, self.precision = device, precision
        self.token_budget = batch_size * TOKENS_PER_SENTENCE
        self.tokens = tokenize(tokenizer, self.sentences, max_length)

    def embed_all(self, encoder: nn.Module) -> np.ndarray:
        """Embeddings of ``self.sentences``, in eval mode (the training mode is restored)."""
        engine = TransformerEngine(encoder, self.tokenizer, self.max_length, self.device, self.precision,
                                   token_budget=self.token_budget)
        was_training = encoder.training
        encoder.eval()
        try:
            return engine.encode_tokens(self.tokens, lambda outputs, features: pool(
                self.pooling, outputs, features["attention_mask"]), needs_hidden_states(self.pooling))
        finally:
            encoder.train(was_training)

    def __call__(self, encoder: nn.Module) -> float:
        store = EmbeddingStore(self.sentences, self.embed_all(encoder))
        metrics = self.task.evaluate(store.embed, seed=0)
        return float(metrics[self.task.metadata.main_score])


def for_training(method: TrainingMethod, config: TrainConfig) -> DevEvaluator:
    """The dev evaluator of a training run: the run's evaluation pooling (the method's unless the
    config overrides it), truncation, batch size, device and precision."""
    device = pick_device(config.device)
    return DevEvaluator(method.tokenizer, config.eval_pooling or method.eval_pooling, config.eval_max_length,
                        config.eval_batch_size, device, check_precision(config.precision, device))
