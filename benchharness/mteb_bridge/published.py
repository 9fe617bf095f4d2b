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

import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import mteb
from mteb.results import TaskResult

from benchharness.core.errors import MissingFileError
from benchharness.mteb_bridge import selection
from benchharness.mteb_bridge.export import EXPORTABLE, RESULTS

logger = logging.getLogger(__name__)
T = TypeVar("T")


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
    """Every model's results under ``folder`` (an mteb cache, or its ``results`` folder). A file that
    cannot be read (truncated, not mteb's format, a link out of the folder) is left out with a
    warning naming it: one bad file among a results repository's thousands must not hide the rest."""
    folder = Path(folder)
    root = folder.parent if folder.name == RESULTS and not (folder / RESULTS).is_dir() else folder
    if not (root / RESULTS).is_dir():
        raise MissingFileError(
            f"{folder}: not an mteb results folder (expected {os.path.join(str(folder), RESULTS)}/<org__model>/"
            "<revision>/<Task>.json, as `benchharness export mteb --out` writes or mteb's results repository holds)"
        )
    inside = os.path.realpath(root)
    # mteb's own choice of files (``<model>/<revision>/<Task>.json``, no experiments), each read by mteb's reader
    paths = mteb.ResultCache(root).get_cache_paths(require_model_meta=False, include_remote=False)
    identities: dict[Path, tuple[str, str]] = {}
    by_model: dict[tuple[str, str], dict[str, TaskResult]] = {}
    for path in sorted(paths):
        result = _guarded(path, inside, TaskResult.from_disk)
        if result is None:
            continue
        if path.parent not in identities:
            identities[path.parent] = _identity(path.parent, inside)
        by_model.setdefault(identities[path.parent], {})[result.task_name] = result
    models = [PublishedModel(name, revision, str(folder), results) for (name, revision), results in by_model.items()]
    if not models:
        raise MissingFileError(f"{folder}: no mteb result that mteb can read under {root / RESULTS}")
    return models


def _identity(revision_folder: Path, inside: str) -> tuple[str, str]:
    """(model name, revision) as mteb's reader takes them: from ``model_meta.json``, else (none, or
    one that cannot be read) from the folder names, ``<org__model>/<revision>``."""
    from_path = (revision_folder.parent.name.replace("__", "/"), revision_folder.name)
    meta = revision_folder / "model_meta.json"
    if not os.path.lexists(meta):
        return from_path
    return _guarded(meta, inside, _name_and_revision, "; its results are named by their folders") or from_path


def _name_and_revision(path: Path) -> tuple[str, str]:
    meta = json.loads(path.read_text(encoding="utf-8"))
    return str(meta["name"]), str(meta["revision"])


def _guarded(path: Path, inside: str, load: Callable[[Path], T], then: str = "") -> T | None:
    """``load(path)``, or None with a one-line warning naming ``path`` (and ``then``, what follows)
    where it is not a regular file whose real path stays in the folder ``inside`` (a link to
    ``/proc/self/environ`` is never opened, a named pipe never waited on) or where loading fails."""
    real = os.path.realpath(path)
    if os.path.commonpath([real, inside]) != inside:
        logger.warning("skipped %s: it links out of the results folder (to %s)%s", path, real, then)
        return None
    if not os.path.isfile(real):
        logger.warning("skipped %s: not a regular file%s", path, then)
        return None
    try:
        return load(Path(real))
    # mteb's reader raises whatever a malformed file makes it raise (json, pydantic, a KeyError of a
    # converter, a UnicodeDecodeError): each is about this one file, named in the warning
    except Exception as exc:
        first = next(iter(str(exc).splitlines()), "")
        logger.warning("skipped %s: unreadable (%s%s)%s", path, type(exc).__name__, f": {first}" if first else "", then)
        return None
