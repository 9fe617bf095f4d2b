"""STS-B dev evaluation of an encoder while it trains, scored exactly as the harness scores it.

The training loop (``benchharness.encoders.methods.loop``) knows no task: ``benchharness train`` builds a
:class:`DevEvaluator` here, in the core, and hands it to the loop as a callback. The evaluator
pools with the same ``benchharness.encoders.pooling.pool`` function and truncation the registered encoder will
use, and lets the task compute the correlation, so the dev score in a manifest is the score
``benchharness run`` reproduces for the saved encoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.devices import autocast, check_precision, pick_device
from benchharness.core.encoder import length_sorted_batches
from benchharness.core.errors import InvalidInputError
from benchharness.encoders.pooling import needs_hidden_states, pool

if TYPE_CHECKING:
    from benchharness.encoders.methods.method import TrainingMethod
    from benchharness.encoders.methods.train_config import TrainConfig

#: the one dev task training selects on (model selection must never see a test split)
DEV_TASK = "STSBenchmark-dev"


class DevEvaluator:
    """STS-B dev Spearman of an encoder module, computed as the harness would.

    The unique dev sentences are tokenized once (length-sorted batches, as ``HFEncoder``) and
    pooled with the pooling the registered encoder will use; the task's own ``evaluate`` computes
    the correlation.
    """

    def __init__(self, tokenizer: Any, pooling: str, max_length: int, batch_size: int, device: torch.device,
                 precision: str, task_name: str = DEV_TASK) -> None:
        if pooling == "prompt":
            raise InvalidInputError("dev evaluation with pooling 'prompt' is not supported by the training loop")
        self.task_name = task_name
        self.task = tasks.get(task_name)
        self.task.load(DataRoot())
        self.sentences = list(dict.fromkeys(self.task.sentences()))
        self.pooling = pooling
        self.device = device
        self.precision = precision
        self.batches = []
        for idx in length_sorted_batches([len(s) for s in self.sentences], batch_size):
            enc = tokenizer([self.sentences[i] for i in idx], padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            self.batches.append((idx, dict(enc)))

    @torch.no_grad()
    def embed_all(self, encoder: nn.Module) -> np.ndarray:
        """Embeddings of ``self.sentences``, in eval mode (the training mode is restored)."""
        was_training = encoder.training
        encoder.eval()
        out = None
        try:
            for idx, enc in self.batches:
                enc = {k: v.to(self.device) for k, v in enc.items()}
                with autocast(self.device, self.precision):
                    outputs = encoder(**enc, output_hidden_states=needs_hidden_states(self.pooling))
                vecs = pool(self.pooling, outputs, enc["attention_mask"]).float().cpu().numpy()
                if out is None:
                    out = np.empty((len(self.sentences), vecs.shape[1]), dtype=np.float32)
                out[idx] = vecs
        finally:
            encoder.train(was_training)
        return out

    def __call__(self, encoder: nn.Module) -> float:
        vectors = self.embed_all(encoder)
        row = {s: i for i, s in enumerate(self.sentences)}
        metrics = self.task.evaluate(lambda sents: vectors[[row[s] for s in sents]], seed=0)
        return float(metrics[self.task.metadata.main_score])


def for_training(method: TrainingMethod, config: TrainConfig) -> DevEvaluator:
    """The dev evaluator of a training run: the run's evaluation pooling (the method's unless the
    config overrides it), truncation, batch size, device and precision."""
    device = pick_device(config.device)
    return DevEvaluator(method.tokenizer, config.eval_pooling or method.eval_pooling, config.eval_max_length,
                        config.eval_batch_size, device, check_precision(config.precision, device))
