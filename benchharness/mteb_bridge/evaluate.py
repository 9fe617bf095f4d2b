"""Run one mteb task with a benchharness encoder: mteb's own data, evaluation and scores.

The returned ``MtebRecord`` holds what a benchharness result needs: the mteb task name, the
dataset and its revision, the mteb version, the main score x100 and every score (x100, flattened
as ``split/subset/metric``, and mteb's own nested dict as it came). It is independent of the
runner: wiring ``--tasks mteb:NAME`` means calling ``run_task`` and storing ``record.metrics``,
``record.main_score`` and ``record.protocol()`` in a ``Result``.

Data: online, mteb downloads the dataset into the Hugging Face cache. Offline (``HF_HUB_OFFLINE``
or ``HF_DATASETS_OFFLINE``), a dataset missing from the cache raises ``DatasetNotCachedError`` naming
the dataset, its revision and the cache folders, instead of the datasets library's bare
"Couldn't reach ... on the Hub"; a run whose tasks lack several tells them in one line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mteb
from mteb.abstasks import AbsTask, AbsTaskRetrieval

from benchharness.core.encoder import Encoder
from benchharness.core.errors import UnavailableDataError, UserError
from benchharness.core.kinds import ViewSettings
from benchharness.evaluation.cache import EmbeddingCache
from benchharness.mteb_bridge.as_model import mteb_model

PREFIX = "mteb:"
PROTOCOL = "mteb"  # protocol variants are "mteb-<mteb version>": the version that ran the evaluation
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
#: the cached tasks a summary names, at most
_NAMED = 5


class MtebDataError(UserError):
    """An mteb task's dataset is not available (offline and not cached, or the download failed)."""


class DatasetNotCachedError(MtebDataError, UnavailableDataError):
    """Offline, an mteb task's dataset is not in the Hugging Face cache. A benchmark's tasks that
    lack theirs are told in one line (``summary``): how many, how to fetch them, which are cached."""

    def __init__(self, task: str, dataset: str, revision: str) -> None:
        self.task, self.dataset, self.revision = task, dataset, revision
        super().__init__(
            f"mteb task {task}: dataset {dataset} at revision {revision} is not available: offline "
            f"({_offline_settings()}) and it is not in the Hugging Face datasets cache ({_folders()}). Run the task "
            f"once online to cache it, or copy the snapshot {_snapshot(dataset, revision)} into HF_HUB_CACHE."
        )

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:  # rebuilt from its fields, not its message
        return type(self), (self.task, self.dataset, self.revision)

    @classmethod
    def summary(cls, failed: Sequence[tuple[str, UnavailableDataError]], loaded: Sequence[str]) -> str:
        cached = [name for name in loaded if name.startswith(PREFIX)]
        online = " ".join(f"{var}=0" for var in _OFFLINE_VARS if _true(os.environ.get(var)))
        named = ", ".join(cached[:_NAMED]) + (f" and {len(cached) - _NAMED} more" if len(cached) > _NAMED else "")
        return (
            f"{len(failed)} of {len(failed) + len(cached)} mteb tasks need a dataset that is not in the Hugging Face "
            f"cache ({_folders()}), and this run is offline ({_offline_settings()}): run it once with {online} to "
            "download them, or copy their snapshots into HF_HUB_CACHE; "
            + (f"cached, and evaluated: {named}" if cached else "none of the mteb tasks selected is cached")
            + " (-v names each dataset)"
        )


@dataclass(frozen=True)
class MtebRecord:
    task: str  # "mteb:<name>", the benchharness task name
    mteb_task: str
    task_type: str
    dataset: str  # Hugging Face dataset id
    dataset_revision: str
    mteb_version: str
    main_metric: str
    main_score: float  # x100
    metrics: dict[str, float]  # "split/subset/metric" -> x100
    scores: dict[str, list[Mapping[str, Any]]] = field(repr=False)  # mteb's TaskResult.scores, unscaled
    evaluation_seconds: float | None = None
    #: the text put in front of each side's sentences (empty for an encoder without prompts)
    prompts: dict[str, str] = field(default_factory=dict)

    def protocol(self) -> dict[str, Any]:
        """What pins the protocol: mteb's task at a dataset revision, as a given mteb version runs it."""
        return {
            "variant": variant(self.mteb_version),
            "mteb_task": self.mteb_task,
            "type": self.task_type,
            "dataset": self.dataset,
            "dataset_revision": self.dataset_revision,
            "mteb_version": self.mteb_version,
            "main_score": self.main_metric,
            "splits": sorted(self.scores),
        }


def variant(mteb_version: str) -> str:
    return f"{PROTOCOL}-{mteb_version}"


def is_mteb_variant(name: str | None) -> bool:
    return bool(name) and str(name).startswith(PROTOCOL + "-")


def task_name(name: str) -> str:
    """``mteb:STS22`` -> ``STS22``; the name mteb knows the task by."""
    return name[len(PREFIX) :] if name.startswith(PREFIX) else name


def get_task(name: str) -> AbsTask:
    """The mteb task for ``name`` (``mteb:`` prefix optional), with mteb's suggestions if unknown."""
    try:
        return mteb.get_task(task_name(name))
    except KeyError as exc:
        raise KeyError(f"unknown mteb task {task_name(name)!r}: {exc.args[0] if exc.args else ''}") from None


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def is_offline() -> bool:
    return any(_true(os.environ.get(var)) for var in _OFFLINE_VARS)


def _offline_settings() -> str:
    """The variables that make this process offline, as they are set (``HF_HUB_OFFLINE=1``)."""
    return ", ".join(f"{var}={os.environ[var]}" for var in _OFFLINE_VARS if var in os.environ)


def _folders() -> str:
    return ", ".join(f"{k}={v}" for k, v in cache_folders().items())


def _snapshot(dataset: str, revision: str) -> str:
    """The folder of a dataset's snapshot under HF_HUB_CACHE."""
    return f"datasets--{dataset.replace('/', '--')}/snapshots/{revision}"


def cache_folders() -> dict[str, str]:
    """Where the datasets library looks for a dataset (hub snapshots and its own arrow cache)."""
    import datasets.config
    from huggingface_hub import constants

    return {"HF_HUB_CACHE": str(constants.HF_HUB_CACHE), "HF_DATASETS_CACHE": str(datasets.config.HF_DATASETS_CACHE)}


def load_task_data(task: AbsTask) -> None:
    """Load the task's dataset, turning a missing dataset into an error that says which one. A
    retrieval task's data are put in mteb's current layout (as its evaluation does first), where
    each split says whether it holds candidate lists to rerank (``as_task.operations``)."""
    if not task.data_loaded:
        _load(task)
    if isinstance(task, AbsTaskRetrieval):
        task.convert_v1_dataset_format_to_v2(num_proc=None)


def _load(task: AbsTask) -> None:
    from datasets.exceptions import DatasetNotFoundError

    try:
        task.load_data()
    except (ConnectionError, DatasetNotFoundError, FileNotFoundError, OSError) as exc:
        path, revision = task.metadata.dataset["path"], task.metadata.dataset["revision"]
        if is_offline():
            raise DatasetNotCachedError(task.metadata.name, path, revision) from exc
        raise MtebDataError(
            f"mteb task {task.metadata.name}: dataset {path} at revision {revision} is not available: the download "
            f"failed ({type(exc).__name__}: {exc}). Run the task once online to cache it, or copy the snapshot "
            f"{_snapshot(path, revision)} into HF_HUB_CACHE."
        ) from exc


def flatten_scores(scores: Mapping[str, list[Mapping[str, Any]]]) -> dict[str, float]:
    """``{split: [{hf_subset, metric: value...}]}`` -> ``{"split/subset/metric": value x100}``;
    numbers only (``languages``, ``hf_subset`` and the like are labels, not scores), and defined ones
    only: mteb's nAUC of a metric every query scores alike is NaN (recall@k of a reranking task
    whose lists hold k candidates or fewer is 1 for every query), a score no result can hold."""
    flat: dict[str, float] = {}
    for split, entries in scores.items():
        for entry in entries:
            subset = entry["hf_subset"]
            for key, value in entry.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    flat[f"{split}/{subset}/{key}"] = float(value) * 100.0
    return flat


def run_task(
    encoder: Encoder,
    task: str | AbsTask,
    cache: EmbeddingCache | None = None,
    batch_size: int = 32,
    settings: ViewSettings | None = None,
) -> MtebRecord:
    """Evaluate ``encoder`` on one mteb task with mteb's own evaluation.

    ``task`` is a name (``STS22`` or ``mteb:STS22``) or an mteb task object (in-memory tasks, as
    mteb's mock tasks are). mteb's result cache is not used: benchharness stores the result, and
    reusing mteb's cache would bypass benchharness's overwrite rules.

    A model of a kind other than dense is handed to mteb in the protocol mteb 2 takes such a model
    in (``as_model.mteb_model``), its outputs cached as ``settings`` (a run's ``ViewSettings``) say;
    what its kind reports beside the scores (active dimensions, bytes per document, pairs scored)
    joins the metrics as ``split/subset/name``, unscaled.
    """
    task_obj = get_task(task) if isinstance(task, str) else task
    load_task_data(task_obj)
    model = mteb_model(encoder, cache, settings)
    outcome = mteb.evaluate(
        model,
        task_obj,
        cache=None,
        encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
        show_progress_bar=False,
        co2_tracker=False,
    )
    if outcome.exceptions:
        raise RuntimeError(f"mteb task {task_obj.metadata.name} failed: {outcome.exceptions[0].exception}")
    (result,) = outcome.task_results
    meta = task_obj.metadata
    return MtebRecord(
        task=PREFIX + result.task_name,
        mteb_task=result.task_name,
        task_type=str(meta.type),
        dataset=meta.dataset["path"],
        dataset_revision=result.dataset_revision,
        mteb_version=result.mteb_version or mteb.__version__,
        main_metric=meta.main_score,
        main_score=float(result.get_score()) * 100.0,
        metrics={**flatten_scores(result.scores), **model.facts()},
        scores=result.scores,
        evaluation_seconds=result.evaluation_time,
        prompts=dict(model.applied),
    )
