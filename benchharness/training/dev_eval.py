"""STS-B dev evaluation of an encoder while it trains, scored exactly as the harness scores it.

The training loop (``benchharness.training.loop``) knows no task: training builds a
:class:`DevEvaluator` here and hands it to the loop as a callback. The evaluator wraps the
module being trained as an in-memory encoder with the pooling and truncation the registered
encoder will use and scores it with :func:`benchharness.evaluate`, the one evaluation code path
(the same engine, pooling and task as ``benchharness run``; no bootstrap intervals), so the dev
score in a manifest is the score ``benchharness run`` reproduces for the saved encoder. It scores
with the training's own settings (``settings.TrainSettings``): their data root and configuration,
made once into the run settings of every evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from benchharness import tasks
from benchharness.core.data_root import DataRoot, default_data
from benchharness.core.devices import check_precision, pick_device
from benchharness.core.errors import InvalidInputError
from benchharness.core.settings import Config, load_config
from benchharness.encoders.in_memory import TransformersModelEncoder
from benchharness.evaluation.evaluate import evaluate_with
from benchharness.evaluation.run_settings import RunSettings

if TYPE_CHECKING:
    from benchharness.training.method import TrainingMethod
    from benchharness.training.options import TrainingOptions
    from benchharness.training.settings import TrainSettings

#: the one dev task training selects on (model selection must never see a test split)
DEV_TASK = "STSBenchmark-dev"


class DevEvaluator:
    """The dev score of an encoder module (STS-B dev Spearman by default), computed by
    ``benchharness.evaluate`` on the module itself."""

    def __init__(
        self,
        tokenizer: Any,
        pooling: str,
        max_length: int,
        batch_size: int,
        device: torch.device,
        precision: str,
        task_name: str = DEV_TASK,
        data: DataRoot | None = None,
        config: Config | None = None,
    ) -> None:
        if pooling == "prompt":
            raise InvalidInputError("dev evaluation with pooling 'prompt' is not supported by the training loop")
        self.task_name = task_name
        self.task = tasks.get(task_name)
        self.data = data or default_data()
        self.task.load(self.data)
        self.sentences = list(dict.fromkeys(self.task.sentences()))
        self.tokenizer, self.pooling, self.max_length = tokenizer, pooling, max_length
        self.batch_size, self.device, self.precision = batch_size, device, precision
        self.settings = RunSettings(
            data_dir=self.data.root,
            verify_data=self.data.verify,
            seed=0,
            intervals=False,
            config=config or load_config(),
        )

    def encoder(self, module: nn.Module) -> TransformersModelEncoder:
        """The module as the encoder its saved run will be: same pooling, truncation and precision."""
        return TransformersModelEncoder(
            "dev",
            module,
            self.tokenizer,
            self.pooling,
            max_length=self.max_length,
            batch_size=self.batch_size,
            device=str(self.device),
            precision=self.precision,
        )

    def __call__(self, module: nn.Module) -> float:
        results = evaluate_with(self.settings, self.encoder(module), [self.task])
        if results.failed:
            raise RuntimeError(f"dev evaluation on {self.task_name} failed: {results.failed[0].message}")
        return results.results[0].main_score


def for_training(method: TrainingMethod, options: TrainingOptions, settings: TrainSettings) -> DevEvaluator:
    """The dev evaluator of a training run: the run's evaluation pooling (the method's unless the
    options override it), truncation, batch size and precision, on the settings' device, data root
    and configuration."""
    device = pick_device(settings.device)
    return DevEvaluator(
        method.tokenizer,
        options.eval_pooling or method.eval_pooling,
        options.eval_max_length,
        options.eval_batch_size,
        device,
        check_precision(options.precision, device),
        data=settings.data(),
        config=settings.config,
    )
