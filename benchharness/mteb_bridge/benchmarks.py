"""mteb benchmarks on the leaderboard: their tasks under benchharness's names, which of them the
stored results cover, and mteb's aggregation of a model's scores.

mteb's leaderboard summarises a benchmark by ``Mean(Task)``, the mean of the tasks' main scores,
and ``Mean(TaskType)``, the mean of the means of each task type, next to those type means
(``mteb.Benchmark.get_score``: aggregations ``MEAN_TASK``, ``MEAN_TASK_TYPE``, ``TASK_TYPES``).
Both are defined only for a model with every task; a type's mean only for a model with every
task of that type. Benchmarks that aggregate otherwise as well (public/private means, subset
means, custom groups) get these three only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import mteb

from benchharness.mteb_bridge import selection

MEAN_TASK, MEAN_TASK_TYPE = "Mean(Task)", "Mean(TaskType)"


@dataclass(frozen=True)
class Benchmark:
    name: str
    #: each task's benchharness name (``selection.canonical``) and mteb task type, in mteb's order
    tasks: dict[str, str]

    @property
    def types(self) -> list[str]:
        """The task types, in the order of the mteb leaderboard's columns (alphabetical)."""
        return sorted(set(self.tasks.values()))

    def aggregate(self, scores: Mapping[str, float | None]) -> dict[str, float | None]:
        """``Mean(Task)``, ``Mean(TaskType)`` and each type's mean of ``scores`` (by task name);
        None where a task it needs has no score."""
        by_type: dict[str, list[float | None]] = {}
        for task, kind in self.tasks.items():
            by_type.setdefault(kind, []).append(scores.get(task))
        type_means = {kind: _mean(values) for kind, values in sorted(by_type.items())}
        return {
            MEAN_TASK: _mean([scores.get(task) for task in self.tasks]),
            MEAN_TASK_TYPE: _mean(list(type_means.values())),
            **type_means,
        }


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present and len(present) == len(values) else None


def benchmark(name: str) -> Benchmark:
    """An mteb benchmark by name or alias (``KeyError`` with mteb's suggestion when unknown)."""
    found = mteb.get_benchmark(name)
    return Benchmark(found.name, selection.task_types(found.tasks))


@dataclass(frozen=True)
class Coverage:
    """What one leaderboard row has scores for: mteb's task names (``names``), and whether it has a
    score for a given benchharness task name (``has``), filters included."""

    names: frozenset[str]
    has: Callable[[str], bool]


def covered(rows: Iterable[Coverage]) -> list[Benchmark]:
    """The mteb benchmarks that at least one row covers whole, in mteb's order. mteb's task names
    rule most benchmarks out before any of their tasks is filtered."""
    rows = [row for row in rows if row.names]
    found = []
    for candidate in mteb.get_benchmarks():
        names = {t.metadata.name for t in candidate.tasks}
        if not any(names <= row.names for row in rows):
            continue
        whole = Benchmark(candidate.name, selection.task_types(candidate.tasks))
        if any(all(row.has(task) for task in whole.tasks) for row in rows):
            found.append(whole)
    return found
