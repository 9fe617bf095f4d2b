"""What the tuners share: the dev scorer, the grid search, and registering the winner.

The grid never re-encodes: each unique dev sentence (and, for RepAL, its masked form) is encoded
once through the runner's cached encoders, and every grid point is a cheap numpy transform of
those vectors (RepAL is linear in f(x), f(x*), v_mean; whitening with k dimensions is the first k
columns of the full-rank transform). The best point is written as a run manifest
(``runs/<name>/manifest.json``) holding the composition string, so ``benchharness run --encoders
<name>`` resolves it at once; the manifest keeps the whole grid for inspection.

Only dev splits are accepted: tuning on a test split would leak its labels into the reported score.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.atomic import write_json
from benchharness.core.data_root import DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import positive_int
from benchharness.core.manifests import MANIFEST, RunManifest
from benchharness.core.provenance import now
from benchharness.core.specs import COMPOSE
from benchharness.encoders.postprocess.fitting import DEFAULT_FIT
from benchharness.evaluation.embeddings import EmbeddingStore
from benchharness.evaluation.resolver import Resolver
from benchharness.evaluation.run_settings import DEFAULT_SEED
from benchharness.training.dev_eval import DEV_TASK

logger = logging.getLogger(__name__)


def parse_grid(text: str) -> list[float]:
    """``0:1:0.1`` (start:stop:step, stop included) or a comma list."""
    if ":" in text:
        start, stop, step = (float(x) for x in text.split(":"))
        n = round((stop - start) / step) + 1
        return [round(start + i * step, 6) for i in range(n)]
    return [float(x) for x in text.split(",") if x.strip()]


def format_number(x: float) -> str:
    return f"{x:g}"


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", required=True, help="base encoder name or composition (e.g. minilm-l6)")
    parser.add_argument(
        "--task", default=DEV_TASK, help=f"dev task to tune on (default {DEV_TASK}; test splits refused)"
    )
    parser.add_argument(
        "--fit",
        default=DEFAULT_FIT,
        help=f"corpus the statistics are fitted on (default {DEFAULT_FIT}; "
        "sts-unlabeled holds unlabeled test sentences: transductive)",
    )
    parser.add_argument("--name", help="name to register the tuned encoder under (default <encoder>+<post>-tuned)")
    parser.add_argument("--device")
    parser.add_argument("--batch-size", type=positive_int)
    parser.add_argument("--data-dir")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write cached embeddings")
    parser.add_argument("--no-verify", action="store_true", help="do not check data files against pinned sha256")


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


def setup(args: argparse.Namespace) -> tuple[Resolver, DataRoot]:
    """(resolver, data root) configured like ``benchharness run`` (same cache, same defaults)."""
    from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
    from benchharness.evaluation.run_settings import RunSettings

    cfg = args.configuration
    data = DataRoot(cfg.data_root(args.data_dir), verify=not args.no_verify)
    cache = None if args.no_cache else EmbeddingCache(cfg.cache_dir)
    settings = RunSettings(device=args.device, batch_size=args.batch_size, data_dir=data.root, config=cfg)
    registry = Resolver(wrap=None if cache is None else (lambda enc: CachingEncoder(enc, cache)), settings=settings)
    return registry, data


def grid_search(
    points: list[dict[str, Any]], vectors_for: Callable[[dict[str, Any]], np.ndarray], scorer: DevScorer
) -> list[dict[str, Any]]:
    """Score every point; returns the points with their ``score`` added, in grid order."""
    return [{**p, "score": scorer.score(vectors_for(p))} for p in points]


def best_of(scored: list[dict[str, Any]]) -> dict[str, Any]:
    """Highest score; ties go to the earliest point of the grid (the smallest parameters)."""
    return max(scored, key=lambda p: (p["score"], -scored.index(p)))


def warn_on_edge(scored: list[dict[str, Any]], best: dict[str, Any], options: dict[str, str]) -> None:
    """Say so when the best value is the grid's largest: the optimum may lie beyond it."""
    for key, option in options.items():
        values = sorted({p[key] for p in scored})
        if len(values) > 1 and best[key] == values[-1]:
            logger.warning(
                "the best %s=%s is the largest in the grid; widen it with %s", key, format_number(best[key]), option
            )


def register(
    name: str,
    spec: str,
    post: str,
    base: str,
    task: str,
    scored: list[dict[str, Any]],
    best: dict[str, Any],
    extra: dict[str, Any],
    runs_dir: Path,
) -> Path:
    """Write the run manifest that makes ``name`` resolve to ``spec``, in ``runs_dir``, and say so."""
    path = runs_dir / name / MANIFEST
    manifest: RunManifest = {
        "name": name,
        "encoder": {"type": COMPOSE, "spec": spec},
        "method": f"tune {post}",
        "base_model": base,
        "tuning": {
            "task": task,
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


def render_grid(scored: list[dict[str, Any]], row: str, col: str | None) -> str:
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
