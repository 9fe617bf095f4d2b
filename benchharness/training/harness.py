"""The harness's side of a method's run: from its examples to its trained runs, the same for every method.

A method declares its options, its examples and its model (``method.Method``); :class:`Trainer`
does the rest, in one order: the examples, read once and cut to ``options.limit`` (their count is
the one the time estimate and the loop use), the checks made before any model loads
(:func:`preflight`), the base model loaded right after seeding with the run's seed (so that the heads
the method then draws are reproducible), the method's module, and the loop (``loop.py``) with the
dev evaluation the settings give. A method with stages (DefSent+'s rounds) drives them through the
same object: :meth:`Trainer.base` and :meth:`Trainer.fit` once per stage.

The dev evaluation reaches the loop as the settings' factory (training passes
``benchharness.training.dev_eval.for_training``), so neither the methods nor the loop know a task.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchharness.core.devices import check_precision, pick_device
from benchharness.core.local_paths import check_local_path
from benchharness.core.manifests import MANIFEST
from benchharness.core.seeding import seed_everything
from benchharness.training import data_parallel
from benchharness.training.base_model import Base, load_base
from benchharness.training.loop import run_loop, total_steps
from benchharness.training.method import SENTENCES, Examples, Method, TrainedRun, TrainingData, TrainingMethod
from benchharness.training.options import TrainingOptions
from benchharness.training.plan import Plan
from benchharness.training.settings import TrainSettings

if TYPE_CHECKING:
    from benchharness.core.data_root import DataRoot

logger = logging.getLogger(__name__)


def load_examples(
    method: Method[Any], options: TrainingOptions, data: DataRoot, held: tuple[str, ...] | None
) -> Examples:
    """The examples a run of ``method`` trains on, from the data root ``data`` or the sentences
    ``held`` in memory, cut to ``options.limit``."""
    return method.examples(options, TrainingData(data, held)).limited(options.limit)


def preflight(options: TrainingOptions, settings: TrainSettings, plan: Plan, n_examples: int | None = None) -> None:
    """Refuse now what the loop would refuse only after the base model has loaded (and a step-0
    dev evaluation has run): a device or precision this machine lacks, a base folder that does not
    exist, too few examples for one batch, a data-parallel run outside torchrun or in a torchrun of
    another size."""
    device = pick_device(settings.device)
    check_precision(options.precision, device)
    data_parallel.check_launch(options.nproc, device)
    check_local_path(plan.base, "--base")
    if n_examples is not None:
        total_steps(n_examples, options)


def in_batch_copies(counts: Sequence[int], batch_size: int) -> float:
    """How many copies of its own text a sentence meets, on average, among the others of its batch,
    for a corpus whose distinct sentences occur ``counts`` times, in batches drawn as the loop draws
    them (a random permutation cut in batches of ``b``): ``(b - 1) * sum(c * (c - 1)) / (n * (n - 1))``."""
    n = sum(counts)
    if n < 2:
        return 0.0
    return (min(batch_size, n) - 1) * sum(c * (c - 1) for c in counts) / (n * (n - 1))


def warn_repeats(sentences: Sequence[str], batch_size: int, name: str) -> None:
    """Warn when the sentences repeat so much that a sentence meets, on average, at least one copy of
    itself in its batch (evenly repeated data: fewer distinct sentences than a batch holds). A copy
    is an in-batch negative identical to the positive, from which a contrastive method learns nothing."""
    counts = list(Counter(sentences).values())
    copies = in_batch_copies(counts, batch_size)
    if copies >= 1:
        logger.warning(
            "training data %s: %s distinct sentences among %s, so in a batch of %d a sentence meets on average "
            "%.1f copies of itself as in-batch negatives, identical to its positive, which teach nothing; "
            "give more varied sentences (more distinct ones than a batch holds)",
            name,
            f"{len(counts):,}",
            f"{len(sentences):,}",
            batch_size,
            copies,
        )


@dataclass(frozen=True)
class Trainer:
    """One method's run under one plan and one set of settings."""

    method: Method[Any]
    options: TrainingOptions
    settings: TrainSettings
    plan: Plan

    def examples(self) -> Examples:
        """The run's examples (rank 0 warns once about sentences too repeated to teach)."""
        found = load_examples(self.method, self.options, self.settings.data(), self.plan.sentences)
        if found.record.get("kind") == SENTENCES and data_parallel.is_main():
            warn_repeats(found.items, self.options.batch_size, self.options.data)
        return found

    def base(self) -> Base:
        """The base model, loaded right after seeding with the run's seed."""
        seed_everything(self.options.seed)
        return load_base(self.plan.base, self.settings.hub)

    def finished(self, round: int) -> bool:
        """Whether stage ``round`` has a finished run in its folder that is to be kept (no ``overwrite``)."""
        out = self.plan.stage(round).out
        return out is not None and (out / MANIFEST).is_file() and not self.settings.overwrite

    def fit(
        self,
        module: TrainingMethod,
        examples: Examples,
        base: Base,
        options: TrainingOptions | None = None,
        round: int | None = None,
    ) -> TrainedRun:
        """Train ``module`` on ``examples`` with the loop and the settings' dev evaluation (with
        ``options`` in place of the run's, and as stage ``round``, for a method with stages); log what
        the finished run produced."""
        plan = self.plan if round is None else self.plan.stage(round)
        run = run_loop(
            module,
            examples.items,
            options or self.options,
            self.settings,
            plan,
            data=examples.record,
            base_source=base.source,
        )
        if run.completed and run.manifest is not None:
            t = run.manifest["training"]
            logger.info(
                "trained %s (%s on %s): %s steps, %s s, %s sentences/s, peak RSS %s MiB",
                run.manifest["name"] or "in memory",
                run.manifest["method"],
                run.manifest["base_model"],
                t["steps"],
                t["train_seconds"],
                t["sentences_per_second"],
                t["peak_rss_mib"],
            )
            if run.best_dev is not None:
                logger.info(
                    "best %s dev spearman %.2f at step %s", run.manifest["dev_task"], run.best_dev, run.best_step
                )
        return run

    def run(self, examples: Examples) -> list[TrainedRun]:
        """The whole run: one module trained by the loop, or the method's own stages."""
        if self.method.stages is not None:
            preflight(self.options, self.settings, self.plan)
            return self.method.stages(self.options, examples, self)
        assert self.method.build is not None  # a method declares one or the other (Method.__post_init__)
        preflight(self.options, self.settings, self.plan, len(examples.items))
        base = self.base()
        module = self.method.build(self.options, base, self.settings.data())
        return [self.fit(module, examples, base)]
