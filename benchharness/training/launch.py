"""The steps every method's ``train(options, context)`` shares around its own: the checks made before
any model loads, the training sentences, the base model, and the loop run with its dev evaluation.

The dev evaluation comes from the context as a factory (training passes
``benchharness.training.dev_eval.for_training``), so the methods and the loop know no evaluation task;
a run that asks for dev evaluation without one is refused by the loop rather than silently trained
without selection.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchharness.core.devices import check_precision, pick_device
from benchharness.core.local_paths import check_local_path
from benchharness.core.seeding import seed_everything
from benchharness.encoders import hub
from benchharness.training import data_parallel
from benchharness.training.base_model import load_base
from benchharness.training.loop import run_loop, total_steps
from benchharness.training.method import TrainedRun, TrainingContext, TrainingMethod
from benchharness.training.options import TrainingOptions

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)


def preflight(options: TrainingOptions, context: TrainingContext, n_examples: int | None = None) -> None:
    """Refuse now what the loop would refuse only after the base model has loaded (and a step-0
    dev evaluation has run): a device or precision this machine lacks, a base folder that does not
    exist, too few examples for one batch, a data-parallel run outside torchrun or in a torchrun of
    another size."""
    device = pick_device(context.device)
    check_precision(options.precision, device)
    data_parallel.check_launch(options.nproc, device)
    check_local_path(context.base, "--base")
    if n_examples is not None:
        total_steps(n_examples, options)


def training_sentences(options: TrainingOptions, context: TrainingContext) -> tuple[list[str], dict[str, Any]]:
    """The unlabeled sentences a run trains on and their description for the manifest: the ones the
    context holds (``benchharness.train(sentences=[...])``), else the corpus ``options.data`` names
    under the context's data root; cut to ``options.limit``. Sentences too repeated for the batch
    to teach anything are warned about (:func:`warn_repeats`), once, by rank 0 of a data-parallel run."""
    if context.sentences is not None:
        sentences = list(context.sentences)
        data: dict[str, Any] = {"name": options.data, "kind": "unlabeled sentences", "n_examples": len(sentences)}
    else:
        from benchharness.training.train_data import load_sentences

        sentences = load_sentences(options.data, context.data)
        data = {"name": options.data, "kind": "unlabeled sentences", "n_examples": len(sentences)}
    sentences, data = limited(sentences, data, options)
    if data_parallel.is_main():
        warn_repeats(sentences, options.batch_size, options.data)
    return sentences, data


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


def limited(examples: list[Any], data: dict[str, Any], options: TrainingOptions) -> tuple[list[Any], dict[str, Any]]:
    """The first ``options.limit`` examples (all without a limit); the record notes the limit."""
    if options.limit:
        examples = examples[: options.limit]
        data["limit"] = options.limit
    return examples, data


def base_model(options: TrainingOptions, context: TrainingContext) -> tuple[PreTrainedModel, Any, hub.ModelSource]:
    """The base encoder, its tokenizer and source, loaded right after seeding with the run's seed,
    so that the heads a method then draws are reproducible."""
    seed_everything(options.seed)
    return load_base(context.base, context.hub)


def run_method(
    method: TrainingMethod,
    examples: Sequence[Any],
    options: TrainingOptions,
    context: TrainingContext,
    data: dict[str, Any],
    source: hub.ModelSource,
) -> TrainedRun:
    """Run the loop, with a dev evaluation built by the context's factory when the options ask for
    one; log what the finished run produced."""
    evaluation = context.dev(method, options, context) if context.dev is not None and options.wants_dev else None
    run = run_loop(
        method,
        examples,
        options,
        context,
        data=data,
        base_source=source,
        dev=evaluation,
        dev_task=evaluation.task_name if evaluation is not None else None,
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
            logger.info("best %s dev spearman %.2f at step %s", run.manifest["dev_task"], run.best_dev, run.best_step)
    return run
