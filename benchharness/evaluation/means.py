"""An encoder's mean over a group of tasks, as a score of its own: NanoBEIR's mean nDCG@10 over its
thirteen datasets, the unweighted mean sentence-transformers' ``NanoBEIREvaluator`` reports.

The mean carries a percentile-bootstrap interval stratified by task
(``benchharness.scoring.confidence.mean_over_tasks``): each task's items (queries) are resampled
within the task, with the seed of that task's own interval, and the tasks' scores are averaged
resample by resample. ``Results.mean`` computes one; ``Results.means`` every one that the task
plugins declare (``TaskProvider.means``) and the results cover; the results' table (what
``benchharness run`` prints) shows them, and the training evaluators select on them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.results import Result
from benchharness.core.task import Evaluation

#: the interval's level and resamples: those of every result's own interval
LEVEL, RESAMPLES = 0.95, 1000


@dataclass(frozen=True)
class GroupMean:
    """The unweighted mean of an encoder's main scores over a group of tasks, with its interval
    (``low``, ``high``), or, where it has none, why (``missing``)."""

    group: str
    encoder: str
    tasks: tuple[str, ...]
    scores: tuple[float, ...]  # each task's main score, in ``tasks`` order
    mean: float
    low: float | None = None
    high: float | None = None
    level: float = LEVEL
    resamples: int = RESAMPLES
    unit: str = ""  # what the interval resampled
    missing: str = ""  # why there is no interval

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    def note(self) -> str:
        """The interval in words, or why there is none."""
        if self.interval is None:
            return f"no interval: {self.missing}"
        return f"{self.level:.0%} CI {self.low:.2f}-{self.high:.2f} ({self.unit})"

    def __str__(self) -> str:
        return f"{self.encoder} on {self.group}: mean {self.mean:.2f} over {len(self.tasks)} tasks, {self.note()}"


def group_mean(
    group: str, tasks: Sequence[str], encoder: str, results: Sequence[Result], items: Callable[[Result], Evaluation]
) -> GroupMean:
    """The mean of ``encoder``'s results on ``tasks`` (named ``group``), every one required; its
    interval where every result's per-item outputs are at hand (``items``)."""
    from benchharness.scoring.confidence import mean_over_tasks
    from benchharness.scoring.stats.bootstrap import derive_seed, percentile_interval

    by_task = {r.task: r for r in results if r.encoder == encoder}
    absent = [t for t in tasks if t not in by_task]
    if absent:
        raise InvalidInputError(
            f"no result of {encoder} on {', '.join(absent)}: the mean of {group} needs all {len(tasks)} of its tasks"
        )
    chosen = [by_task[t] for t in tasks]
    scores = tuple(r.main_score for r in chosen)
    mean = GroupMean(group, encoder, tuple(tasks), scores, sum(scores) / len(scores))
    try:
        parts = [(items(r), r.main_metric, derive_seed(r.seed, r.task)) for r in chosen]
        reps = mean_over_tasks(parts, RESAMPLES)
        low, high = percentile_interval(reps.values, LEVEL)
    except UserError as exc:  # a result without items, too few items to resample
        return replace(mean, missing=" ".join(str(exc).split()))
    return replace(mean, low=low, high=high, unit=reps.unit)


def declared_means(encoders: Sequence[str], results: Sequence[Result]) -> list[tuple[str, list[str], str]]:
    """(group, tasks, encoder) for every group whose mean the task plugins declare and whose every
    task has a result of the encoder, in the encoders' order."""
    from benchharness import tasks as task_registry

    have = {(r.encoder, r.task) for r in results}
    if not have:
        return []
    declared = task_registry.means()
    return [
        (group, names, encoder)
        for encoder in encoders
        for group, names in declared.items()
        if all((encoder, t) in have for t in names)
    ]
