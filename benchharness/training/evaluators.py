"""The harness's protocols inside a training loop.

- :class:`STSEvaluator`, a sentence-transformers ``SentenceEvaluator``: pass it as ``evaluator=`` to
  ``SentenceTransformerTrainer`` (or ``fit``); it scores the model being trained on benchharness
  tasks (STS-B dev by default) exactly as ``benchharness run`` scores a saved checkpoint.
- :class:`EvaluationCallback`, a ``transformers.TrainerCallback`` for plain transformers models:
  at each evaluation (and every ``every_steps`` steps if asked) it scores the model with the given
  tokenizer and pooling and adds the scores to the logged metrics.

Both call :func:`benchharness.evaluate` on the model object itself (its weights are fingerprinted
at each call), in memory, so the numbers are those of the one evaluation code path. Given a group
whose mean is a score of its own (``"nanobeir"``), both report that mean with its interval
(:class:`Means`), and a training loop may select its checkpoint on it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# where sentence-transformers >= 5.2 keeps its evaluators (pyproject requires >= 6.0)
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator
from transformers import TrainerCallback

from benchharness import tasks as task_registry
from benchharness.core.lists import split_outside_brackets
from benchharness.core.settings import Config, configuration
from benchharness.core.task import Task
from benchharness.evaluation.evaluate import evaluate, resolve_tasks
from benchharness.evaluation.results import Results

logger = logging.getLogger(__name__)

#: the dev split training selects on (a test split must never steer training)
DEFAULT_TASKS = ("STSBenchmark-dev",)


def _is_count(key: str) -> bool:
    """``n`` (pairs, items) and ``n_*`` are counts, never scaled like a score."""
    return key == "n" or key.startswith("n_")


def metrics_of(results: Results, scale: float = 1.0) -> dict[str, float]:
    """Flat metrics ``<task>_<metric>`` of every result (scores as fractions with ``scale`` 0.01,
    the sentence-transformers convention; counts as they are), plus ``<task>_main``."""
    out: dict[str, float] = {}
    for r in results:
        for key, value in r.metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"{r.task}_{key.replace('.', '_')}"] = float(value) * (1.0 if _is_count(key) else scale)
        out[f"{r.task}_main"] = r.main_score * scale
    return out


class Means:
    """The means an evaluator reports beside its tasks' scores, each with its interval (each task's
    items resampled within the task, ``evaluation.means``): those of the groups named among its tasks
    that the task plugins declare a score of their own (``nanobeir``), and with ``mean=True`` the
    mean over all its tasks, as ``NanoBEIREvaluator`` averages the datasets it is given."""

    def __init__(self, tasks: Sequence[str], everything: bool, config: Config) -> None:
        declared = {group.lower(): group for group in task_registry.means(config)}
        named = [item.strip() for entry in tasks for item in split_outside_brackets(entry)]
        self.groups = list(dict.fromkeys(declared[n.lower()] for n in named if n.lower() in declared))
        self.everything = everything
        first = declared.get(named[0].lower()) if named else None
        #: the metric that selects the best checkpoint: the mean over everything, else the first
        #: task's when it is a group's, else None (the first task's main score)
        self.primary = "mean" if everything else (None if first is None else f"{first}_mean")

    def metrics(self, results: Results, scale: float, step: int) -> dict[str, float]:
        """``<group>_mean`` with ``<group>_mean_low`` and ``<group>_mean_high`` (scores times
        ``scale``), and ``mean`` with ``mean_low`` and ``mean_high``; each mean is also logged with its interval."""
        out: dict[str, float] = {}
        averages = [(f"{group}_mean", results.mean(group)) for group in self.groups]
        if self.everything:
            averages.append(("mean", results.mean(results.tasks)))
        for key, mean in averages:
            out[key] = mean.mean * scale
            if mean.interval is not None:
                out[f"{key}_low"], out[f"{key}_high"] = mean.interval[0] * scale, mean.interval[1] * scale
            logger.info("step %s: %s %.2f over %d tasks, %s", step, key, mean.mean, len(mean.tasks), mean.note())
        return out


class _TaskScoring:
    """What both evaluators keep and do: the tasks, resolved once and loaded at the first
    evaluation, reused by every later one; the configuration, read once for every evaluation
    (``benchharness.evaluate``'s ``config``); the means; and every evaluation's Results, with the
    step it was taken at (``history``)."""

    def __init__(
        self, tasks: Sequence[str] | str, batch_size: int | None, data_dir: str | None, config: Config, mean: bool
    ) -> None:
        self.tasks = [tasks] if isinstance(tasks, str) else list(tasks)
        self.batch_size, self.data_dir = batch_size, data_dir
        self.config = config
        self._selected: list[Task] | None = None
        self.means = Means(self.tasks, mean, self.config)
        self.history: list[tuple[int, Results]] = []

    def _scores(self, model: Any, step: int, scale: float, name: str, **options: Any) -> dict[str, float]:
        """``model`` evaluated on the tasks as ``name`` (``options``: ``evaluate``'s others): every
        task's metrics and the means, scores times ``scale``."""
        if self._selected is None:
            self._selected = resolve_tasks(self.tasks, self.config)
        results = evaluate(
            model,
            self._selected,
            name=name,
            batch_size=self.batch_size,
            data_dir=self.data_dir,
            intervals=False,
            config=self.config,
            **options,
        )
        self.history.append((step, results))
        return {**metrics_of(results, scale), **self.means.metrics(results, scale, step)}


class STSEvaluator(SentenceEvaluator, _TaskScoring):
    """benchharness tasks as a sentence-transformers evaluator.

    Metrics are named ``<name>_<task>_<metric>`` with sentence-transformers' fractions (0.8203, not
    82.03); ``primary_metric`` is the first task's main score (Spearman for STS), which the trainer
    uses for ``load_best_model_at_end`` and ``metric_for_best_model="eval_<name>_<task>_main"``.
    A group whose mean is a score of its own (``"nanobeir"``) adds ``<name>_<group>_mean`` with its
    interval (``_mean_low``, ``_mean_high``), and is the primary metric when it comes first;
    ``mean=True`` adds the mean over all the tasks, ``<name>_mean``, and selects on it.
    """

    def __init__(
        self,
        tasks: Sequence[str] | str = DEFAULT_TASKS,
        name: str = "benchharness",
        batch_size: int | None = None,
        data_dir: str | None = None,
        seed: int | None = None,
        config: Config | str | Path | None = None,
        mean: bool = False,
    ) -> None:
        SentenceEvaluator.__init__(self)
        _TaskScoring.__init__(self, tasks, batch_size, data_dir, configuration(config), mean)
        self.name, self.seed = name, seed
        self.primary_metric = self.means.primary or f"{self.tasks[0]}_main"
        self.greater_is_better = True

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        options: dict[str, Any] = {} if self.seed is None else {"seed": self.seed}  # else evaluate's default
        scores = self._scores(model, steps, 0.01, f"{self.name}@step{steps}", **options)
        metrics = self.prefix_name_to_metrics(scores, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics


class EvaluationCallback(TrainerCallback, _TaskScoring):
    """benchharness tasks scored on a transformers model during ``Trainer.train``.

    The model is encoded with ``tokenizer`` and ``pooling`` (a name of ``hf:``'s poolings), as
    ``hf:<saved checkpoint>?pooling=<pooling>`` would encode it. Scores (x100, benchharness's
    scale) are added to the evaluation metrics as ``eval_benchharness_<task>_<metric>``; with
    ``every_steps`` they are also taken every that many steps and appended to the trainer's log. A
    group whose mean is a score of its own (``"nanobeir"``) adds ``eval_benchharness_<group>_mean``
    with its interval (``_mean_low``, ``_mean_high``), ``mean=True`` the mean over all the tasks
    (``eval_benchharness_mean``): ``metric_for_best_model`` may name either.
    """

    def __init__(
        self,
        tokenizer: Any,
        pooling: str,
        tasks: Sequence[str] | str = DEFAULT_TASKS,
        every_steps: int | None = None,
        batch_size: int | None = None,
        data_dir: str | None = None,
        config: Config | str | Path | None = None,
        mean: bool = False,
    ) -> None:
        _TaskScoring.__init__(self, tasks, batch_size, data_dir, configuration(config), mean)
        self.tokenizer, self.pooling, self.every_steps = tokenizer, pooling, every_steps

    def score(self, model: Any, step: int) -> dict[str, float]:
        scores = self._scores(model, step, 1.0, f"model@step{step}", tokenizer=self.tokenizer, pooling=self.pooling)
        return {f"benchharness_{k}": v for k, v in scores.items()}

    def on_evaluate(
        self,
        args: Any,
        state: Any,
        control: Any,
        model: Any = None,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if model is not None and metrics is not None:
            metrics.update({f"eval_{k}": v for k, v in self.score(model, state.global_step).items()})

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.every_steps and model is not None and state.global_step % self.every_steps == 0:
            state.log_history.append({**self.score(model, state.global_step), "step": state.global_step})
