"""Published mteb results, read from a folder in mteb's results layout, for the leaderboard and
``compare`` to show beside the user's own runs.

The folder is an mteb cache (``<folder>/results/<org__model>/<revision>/<Task>.json``, as
``benchharness export mteb`` writes and ``mteb.ResultCache`` reads) or a clone of mteb's results
repository, whose root has the same ``results/`` folder. mteb's own reader loads it, offline
(``include_remote=False``). The rows go beside the mteb tasks and benchmarks measured here, and
beside the tasks whose protocol equals an mteb task's (STS12-16 in SentEval's protocol, whose
number is the one mteb computes: ``export.EXPORTABLE``). A task's score for a benchharness task
name is the one mteb's leaderboard takes: the result filtered to the name's subsets and splits
(``TaskResult.validate_and_filter_scores``), its main scores averaged (``get_score``), x100.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import mteb
from mteb.results import TaskResult

from benchharness.core.errors import MissingFileError
from benchharness.mteb_bridge import selection
from benchharness.mteb_bridge.export import EXPORTABLE, RESULTS


@dataclass
class PublishedModel:
    """One model's results in an mteb results folder."""

    name: str  # as mteb names it: ``org/model``
    revision: str
    source: str  # the folder, as given
    results: dict[str, TaskResult] = field(repr=False)  # by mteb task name
    #: each benchharness task's score once computed: the leaderboard asks for it once to find the
    #: benchmarks a model covers and again for its tables
    _scores: dict[str, float | None] = field(default_factory=dict, repr=False)

    @property
    def tasks(self) -> frozenset[str]:
        return frozenset(self.results)

    def score(self, task: str) -> float | None:
        """The main score x100 of benchharness task ``task`` (``mteb:STS12``,
        ``mteb:STS22.v2[subsets=en]``, or a task whose protocol equals an mteb task's:
        ``export.EXPORTABLE``, STS12 in SentEval's protocol), or None where the folder has no
        score for all of it."""
        if task not in self._scores:
            self._scores[task] = self._score(task)
        return self._scores[task]

    def _score(self, task: str) -> float | None:
        if task in EXPORTABLE:
            task = selection.PREFIX + EXPORTABLE[task].mteb_task
        if not task.startswith(selection.PREFIX):
            return None
        found = self.results.get(selection.parse(task).name)
        if found is None:
            return None
        try:
            value = found.validate_and_filter_scores(selection.task(task)).get_score()
        except (KeyError, ValueError):  # a task mteb no longer knows, a filter mteb cannot apply
            return None
        return None if value is None or math.isnan(value) else float(value) * 100.0


def read(folder: str | Path) -> list[PublishedModel]:
    """Every model's results under ``folder`` (an mteb cache, or its ``results`` folder)."""
    folder = Path(folder)
    root = folder.parent if folder.name == RESULTS and not (folder / RESULTS).is_dir() else folder
    if not (root / RESULTS).is_dir():
        raise MissingFileError(
            f"{folder}: not an mteb results folder (expected {os.path.join(str(folder), RESULTS)}/<org__model>/"
            "<revision>/<Task>.json, as `benchharness export mteb --out` writes or mteb's results repository holds)"
        )
    loaded = mteb.ResultCache(root).load_results(require_model_meta=False, include_remote=False)
    models = [
        PublishedModel(m.model_name, str(m.model_revision), str(folder), {r.task_name: r for r in m.task_results})
        for m in loaded.model_results
        if m.task_results
    ]
    if not models:
        raise MissingFileError(f"{folder}: no mteb result that mteb can read under {root / RESULTS}")
    return models
