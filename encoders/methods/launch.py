"""What every training command shares once its method is built: the dev evaluator, the loop, the
report.

The dev evaluator comes from the caller as a factory (``benchharness train`` passes
``benchharness.training.dev_eval.for_training``): encoders know no evaluation task, and a run that asks for
dev evaluation without one is refused by the loop rather than silently trained without selection.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from torch import nn

from benchharness.core.devices import check_precision, pick_device
from benchharness.core.local_paths import check_local_path
from benchharness.core.manifests import registered_runs
from benchharness.core.settings import load_config
from benchharness.encoders import hub
from benchharness.encoders.methods import data_parallel
from benchharness.encoders.methods.base_model import base_folder
from benchharness.encoders.methods.loop import TrainResult, total_steps, train
from benchharness.encoders.methods.method import TrainingMethod
from benchharness.encoders.methods.train_config import TrainConfig

logger = logging.getLogger(__name__)


class DevEvaluation(Protocol):
    """A dev evaluation the loop can call, and the name of the task it scores on (for the manifest)."""

    task_name: str

    def __call__(self, encoder: nn.Module) -> float: ...


#: builds the dev evaluation of a run from its method (tokenizer, pooling) and config
DevFactory = Callable[[TrainingMethod, TrainConfig], DevEvaluation]


def preflight(config: TrainConfig, n_examples: int | None = None) -> None:
    """Refuse now what the loop would refuse only after the base model has loaded (and a step-0
    dev evaluation has run): a device or precision this machine lacks, a ``--base`` folder that
    does not exist, too few examples for one batch, a data-parallel run outside torchrun or in a
    torchrun of another size."""
    device = pick_device(config.device)
    check_precision(config.precision, device)
    data_parallel.check_launch(config.nproc, device)
    check_local_path(base_folder(config.base), "--base")
    if n_examples is not None:
        total_steps(n_examples, config)


def train_with_dev(
    method: TrainingMethod,
    examples: Sequence[Any],
    config: TrainConfig,
    data: dict[str, Any],
    source: hub.ModelSource,
    dev: DevFactory | None,
) -> TrainResult:
    """Run the loop, with a dev evaluation built by ``dev`` when the config asks for one."""
    evaluation = dev(method, config) if dev is not None and config.wants_dev else None
    return train(
        method,
        examples,
        config,
        data=data,
        base_source=source,
        dev=evaluation,
        dev_task=evaluation.task_name if evaluation is not None else None,
    )


def report(result: TrainResult) -> int:
    """Log what a finished (or paused) run produced (at info: the command line shows it); the CLI
    exit status."""
    if not result.completed or result.manifest is None:
        return 0
    m = result.manifest
    t = m["training"]
    logger.info(
        "trained %s (%s on %s): %s steps, %s s, %s sentences/s, peak RSS %s MiB",
        m["name"],
        m["method"],
        m["base_model"],
        t["steps"],
        t["train_seconds"],
        t["sentences_per_second"],
        t["peak_rss_mib"],
    )
    if result.best_dev is not None:
        logger.info("best STS-B dev spearman %.2f at step %s", result.best_dev, result.best_step)
    logger.info("%s", resolvable_as(result.out, m["name"]))
    return 0


def resolvable_as(out: Path, name: str) -> str:
    """What ``run --encoders`` accepts for a finished run: its name when the runs folder registers
    it under that name (``registered_runs``), else its folder, absolute (a folder resolves by its manifest.json
    from anywhere; a name only where ``registered_runs`` finds it, directly under the runs folder)."""
    folder = out.resolve()
    registered = registered_runs(load_config().runs_dir).get(name)
    if registered is not None and registered.resolve() == folder:
        return (
            f"encoder registered: {name} (in {folder}); evaluate it with: benchharness run --encoders "
            f"{shlex.quote(name)} --tasks sts"
        )
    return (
        f"encoder saved in {folder} ({name}); evaluate it with: benchharness run --encoders "
        f"{shlex.quote(str(folder))} --tasks sts"
    )
