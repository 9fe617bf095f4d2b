"""What the tuners share: their common options, the dev scorer, the grid search, and registering the
winner.

A tuner is a ``tuners`` plugin module with ``HELP``, ``OPTIONS`` (a frozen options class extending
:class:`TuneOptions`, each field an ``option``: ``benchharness tune <name>`` derives its flags from
it) and ``tune(options, settings) -> str``, which scores its grid with the run settings the command
builds (device, batch size, data root, cache) and returns its output.

The grid never re-encodes: each unique dev sentence (and, for RepAL, its masked form) is encoded
once through the runner's cached encoders, and every grid point is a cheap numpy transform of
those vectors (RepAL is linear in f(x), f(x*), v_mean; whitening with k dimensions is the first k
columns of the full-rank transform). The best point is written as a run manifest
(``runs/<name>/manifest.json``) holding the composition string, so ``benchharness run --encoders
<name>`` resolves it at once; the manifest keeps the whole grid for inspection.

Only dev splits are accepted: tuning on a test split would leak its labels into the reported score.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.atomic import write_json
from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.manifests import MANIFEST, RunManifest
from benchharness.core.provenance import now
from benchharness.core.specs import COMPOSE
from benchharness.encoders.postprocess.fitting import DEFAULT_FIT
from benchharness.evaluation.embeddings import EmbeddingStore
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import DEFAULT_SEED, RunSettings
from benchharness.training.dev_eval import DEV_TASK
from benchharness.training.options import Declared, option

logger = logging.getLogger(__name__)

#: a grid point: its parameters by name, and once scored its dev ``score``
Point = dict[str, Any]


def parse_grid(text: str) -> list[float]:
    """``0:1:0.1`` (start:stop:step, stop included) or a comma list."""
    if ":" in text:
        start, stop, step = (float(x) for x in text.split(":"))
        n = round((stop - start) / step) + 1
        return [round(start + i * step, 6) for i in range(n)]
    return [float(x) for x in text.split(",") if x.strip()]


def format_number(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class TuneOptions(Declared):
    """What every tuner takes: the encoder to tune, the dev task, the fit corpus and the name."""

    encoder: str = option(MISSING, "base encoder name or composition (e.g. minilm-l6)")
    task: str = option(DEV_TASK, f"dev task to tune on (default {DEV_TASK}; test splits refused)")
    fit: str = option(
        DEFAULT_FIT,
        f"corpus the statistics are fitted on (default {DEFAULT_FIT}; "
        "sts-unlabeled holds unlabeled test sentences: transductive)",
    )
    name: str | None = option(None, "name to register the tuned encoder under (default <encoder>+<post>-tuned)")


class DevScorer:
    """Loads the dev task once and scores any matrix of vectors for its unique sentences."""

    def __init__(self, task_name: str, data: DataRoot) -> None:
        from benchharness import tasks

        self.task = tasks.get(task_name)
        if self.task.metadata.split == "test":
            raise InvalidInputError(f"{task_name} is a test split; tune on a dev split such as {DEV_TASK}")
        self.task.load(data)
        self.sentences = list(dict.fromkeys(self.task.sentences()))

    def score(self, vectors: np.ndarray) -> float:
        store = EmbeddingStore(self.sentences, np.asarray(vectors, dtype=np.float32))
        return float(self.task.evaluate(store.embed, DEFAULT_SEED)[self.task.metadata.main_score])


def resolver_for(settings: RunSettings) -> Resolver:
    """The resolver of a tuning run: configured like ``benchharness run`` (the same cache, the same
    defaults), its encoders cached when the settings have a cache."""
    from benchharness.evaluation.run_resolver import cache_at, caching

    cache = None if settings.cache_dir is None else cache_at(settings.cache_dir)
    return Resolver(wrap=None if cache is None else caching(cache), settings=settings)


def grid_search(points: list[Point], vectors_for: Callable[[Point], np.ndarray], scorer: DevScorer) -> list[Point]:
    """Score every point; returns the points with their ``score`` added, in grid order."""
    return [{**p, "score": scorer.score(vectors_for(p))} for p in points]


def best_of(scored: list[Point]) -> Point:
    """Highest score; ties go to the earliest point of the grid (the smallest parameters)."""
    return max(scored, key=lambda p: (p["score"], -scored.index(p)))


def warn_on_edge(scored: list[Point], best: Point, flags: dict[str, str]) -> None:
    """Say so when the best value is the grid's largest: the optimum may lie beyond it (``flags``:
    the flag that widens each parameter's grid)."""
    for key, flag in flags.items():
        values = sorted({p[key] for p in scored})
        if len(values) > 1 and best[key] == values[-1]:
            logger.warning(
                "the best %s=%s is the largest in the grid; widen it with %s", key, format_number(best[key]), flag
            )


def register(
    options: TuneOptions, post: str, spec: str, scored: list[Point], best: Point, extra: dict[str, Any], runs_dir: Path
) -> Path:
    """Write the run manifest that makes the tuned encoder's name (``options.name``, else
    ``<encoder>+<post>-tuned``) resolve to ``spec``, its best point of the grid ``scored`` on the
    options' dev task, in ``runs_dir``, and say so."""
    name = options.name or f"{options.encoder}+{post}-tuned"
    path = runs_dir / name / MANIFEST
    manifest: RunManifest = {
        "name": name,
        "encoder": {"type": COMPOSE, "spec": spec},
        "method": f"tune {post}",
        "base_model": options.encoder,
        "tuning": {
            "task": options.task,
            "selection": "highest dev score; ties -> first grid point",
            "best": best,
            "grid": scored,
            **extra,
        },
        "date": now(),
    }
    write_json(path, manifest)
    logger.info(
        "registered %r = %s (%s); evaluate it with: benchharness run --encoders '%s' --tasks sts",
        name,
        spec,
        path,
        name,
    )
    return path


def render_grid(scored: list[Point], row: str, col: str | None) -> str:
    """The dev score of every grid point, as a table (one column, or ``row`` x ``col``)."""
    from tabulate import tabulate

    if col is None:
        return tabulate([[p[row], f"{p['score']:.2f}"] for p in scored], headers=[row, "dev"], tablefmt="github")
    rows = list(dict.fromkeys(p[row] for p in scored))
    cols = list(dict.fromkeys(p[col] for p in scored))
    table = {(p[row], p[col]): p["score"] for p in scored}
    return tabulate(
        [[f"{row}={format_number(r)}", *(f"{table[(r, c)]:.2f}" for c in cols)] for r in rows],
        headers=[f"{row} \\ {col}", *map(format_number, cols)],
        tablefmt="github",
    )
