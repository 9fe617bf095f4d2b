"""Stored benchharness results in mteb's results layout.

``export_results`` writes ``<out>/results/<org__name>/<revision>/<Task>.json`` plus
``model_meta.json`` and, in ``benchharness/provenance.json``, benchharness's own record (the
encoder, and by task the prompt each side's sentences got): ``out`` is an mteb cache folder, so
``mteb.ResultCache(out)`` loads the results, and with ``out = $MTEB_CACHE`` (default
``~/.cache/mteb``) they sit beside mteb's own. The model is named and versioned as
``as_model.model_meta`` does (``benchharness/<encoder>``, revision = encoder identity).

Only results whose protocol equals an mteb task's are exported: a number under an mteb task name
must be the number mteb computes. ``EXPORTABLE`` is that allow-list, each with the evidence;
``NOT_EXPORTED`` gives the reason for every other benchharness task. Results of mteb tasks run
through the bridge (``evaluate.run_task``) are mteb's own evaluation and are exported as they are.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, cast

import mteb
from mteb.models import ModelMeta
from mteb.results import TaskResult

from benchharness.core.atomic import write_json
from benchharness.core.errors import InvalidInputError
from benchharness.core.settings import FILE_PROTOCOL_PREFIX
from benchharness.mteb_bridge import evaluate, selection
from benchharness.mteb_bridge.as_model import export_name, model_meta
from benchharness.mteb_bridge.model_facts import model_facts


@dataclass(frozen=True)
class Target:
    """An mteb STS task that a benchharness task reproduces exactly."""

    mteb_task: str
    protocol: str  # the benchharness protocol variant a stored result must carry
    spearman: str  # metric keys in the stored result
    pearson: str
    evidence: str


_STS_YEAR = (
    "SentEval's tokenized, lowercased {year} files are the text of mteb's {year} dataset (same "
    "{n} pairs; character totals of both sides equal mteb's descriptive statistics{extra}); "
    "benchharness's 'all' aggregation is one Spearman over the merged subsets, mteb's cosine_spearman"
)
_PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}

EXPORTABLE: dict[str, Target] = {
    **{
        year: Target(
            year,
            "senteval-unsup-cosine",
            "all.spearman",
            "all.pearson",
            _STS_YEAR.format(
                year=year,
                n=_PAIRS[year],
                extra=(
                    ", but for one tweet-news sentence whose trailing space SentEval's whitespace re-join drops"
                    if year == "STS14"
                    else ""
                ),
            ),
        )
        for year in _PAIRS
    },
    "STSBenchmark-raw": Target(
        "STSBenchmark",
        "senteval-unsup-cosine-rawtext",
        "spearman",
        "pearson",
        "the original cased STS-B test file, mteb's STSBenchmark (1379 pairs); 12 sentences end in a space that "
        "benchharness strips and mteb keeps, which tokenizers and whitespace splitting ignore",
    ),
}

NOT_EXPORTED: dict[str, str] = {
    "STSBenchmark": "SentEval's tokenized, lowercased copy of STS-B; mteb's STSBenchmark is the original cased "
    "text (export STSBenchmark-raw instead)",
    "SICKRelatedness": "the 4,927 test pairs; mteb's SICK-R scores all 9,927 pairs (train + trial + test): "
    "see SICKRelatedness-mteb",
    "SICKRelatedness-mteb": "mteb's 9,927 SICK-R pairs with the same gold scores, but not the same text: mteb's "
    "sentences total 676 and 647 characters fewer than SICK's files (mteb's descriptive "
    "statistics), so the score is close to mteb's, not equal; run mteb:SICK-R for mteb's",
    "AskUbuntu": "the useb/TSDAE protocol (test split, 186 queries); mteb's AskUbuntuDupQuestions has 361 queries",
    "AskUbuntu-mteb": "mteb's 361 queries, but titles come from taolei87's tokenized file, not checked against "
    "mteb's dataset text, and equal cosines keep BM25 order here while mteb (pytrec_eval "
    "map_cut.1000) orders them by document id",
    "QQP": "PaSeR's retrieval setting; no mteb task has this protocol",
}
#: the folder of an mteb cache that holds results (``ResultCache(cache)`` reads ``<cache>/results``)
RESULTS = "results"
#: benchharness's own record beside a model's results (encoder, identity, why it is named so, the
#: prompts each task's sides got, the card's datasets): not in ``model_meta.json``, whose
#: ``ModelMeta`` forbids unknown keys when mteb submits results, and in a folder of its own, whose
#: files mteb's reader never takes for task results (it reads ``<model>/<revision>/*.json``)
PROVENANCE = Path("benchharness") / "provenance.json"
#: the provenance key listing the files of the model folder an export wrote, which alone it may replace
WRITTEN = "written"
MODEL_META = "model_meta.json"
_NO_MTEB_TASK = (
    "no mteb task has this protocol (SentEval transfer tasks, dev and trial splits and other "
    "benchharness protocols have none)"
)


class StoredResult(Protocol):
    """The fields of ``benchharness.core.results.Result`` that an export reads (read-only: so that
    the result's own, narrower field types match)."""

    @property
    def encoder(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def metrics(self) -> Mapping[str, Any]: ...
    @property
    def protocol(self) -> Mapping[str, Any]: ...
    @property
    def encoder_identity(self) -> Mapping[str, Any]: ...
    @property
    def encoder_metadata(self) -> Mapping[str, Any]: ...
    @property
    def date(self) -> str: ...


@dataclass
class ExportReport:
    exported: list[dict[str, str]] = field(default_factory=list)  # encoder, task, mteb_task, path
    skipped: list[dict[str, str]] = field(default_factory=list)  # encoder, task, reason

    def lines(self) -> list[str]:
        """Human-readable: what went where, and why the rest did not."""
        out = [f"exported {r['encoder']} {r['task']} -> {r['path']}" for r in self.exported]
        out += [f"not exported {r['encoder']} {r['task']}: {r['reason']}" for r in self.skipped]
        return out


def reason_not_exported(task: str, variant: object = None) -> str:
    """Why a result of ``task`` (stored under the protocol ``variant``) has no mteb counterpart."""
    if task in NOT_EXPORTED:
        return NOT_EXPORTED[task]
    if str(variant).startswith(FILE_PROTOCOL_PREFIX):
        return (
            f"a task declared from your own files ([tasks.{task}], protocol {variant}): mteb has no task with its "
            "data, and mteb's results layout holds only mteb tasks' results"
        )
    return _NO_MTEB_TASK


def _date(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _sts_scores(result: StoredResult, target: Target) -> dict[str, Any]:
    """mteb's STS score names; the encoders' similarity is cosine, so pearson/spearman (the model's
    own similarity) equal the cosine ones. Manhattan and Euclidean are not computed here."""
    spearman = result.metrics[target.spearman] / 100.0
    pearson = result.metrics[target.pearson] / 100.0
    return {
        "pearson": pearson,
        "spearman": spearman,
        "cosine_pearson": pearson,
        "cosine_spearman": spearman,
        "main_score": spearman,
    }


def _mteb_scores(result: StoredResult) -> dict[str, dict[str, dict[str, Any]]]:
    """Rebuild ``{split: {subset: scores}}`` from the flattened ``split/subset/metric`` (x100)."""
    nested: dict[str, dict[str, dict[str, Any]]] = {}
    for key, value in result.metrics.items():
        parts = key.split("/")
        if len(parts) == 1:
            continue  # the main score, mteb's mean over splits and subsets: mteb derives it again
        if len(parts) != 3:
            raise InvalidInputError(
                f"result {result.encoder}/{result.task}: metric {key!r} is not 'split/subset/metric'"
            )
        split, subset, metric = parts
        nested.setdefault(split, {}).setdefault(subset, {})[metric] = value / 100.0
    for subsets in nested.values():
        for scores in subsets.values():
            scores["mteb_version"] = result.protocol["mteb_version"]
    return nested


def task_result(result: StoredResult) -> TaskResult | str:
    """The mteb ``TaskResult`` of a stored result, or the reason it has none."""
    variant = result.protocol.get("variant")
    if evaluate.is_mteb_variant(variant):
        task = selection.task(result.task)  # filtered as the result's name says (``selection``)
        # mteb annotates evaluation_time float, yet TaskResult's field is float | None (a stored result has none)
        built = TaskResult.from_task_results(
            task,
            _mteb_scores(result),
            evaluation_time=None,  # type: ignore[arg-type]
            date=_date(result.date),
        )
        return built.model_copy(
            update={
                "dataset_revision": result.protocol["dataset_revision"],
                "mteb_version": result.protocol["mteb_version"],
            }
        )
    target = EXPORTABLE.get(result.task)
    if target is None:
        return reason_not_exported(result.task, variant)
    if variant != target.protocol:
        return f"stored with protocol {variant!r}; only {target.protocol!r} equals mteb's {target.mteb_task}"
    task = mteb.get_task(target.mteb_task)
    return TaskResult.from_task_results(
        task,
        {"test": {"default": _sts_scores(result, target)}},
        evaluation_time=None,  # type: ignore[arg-type]  # as above: the field is float | None
        date=_date(result.date),
    )


@dataclass
class _Planned:
    """One result to write: its file, its model's folder and what goes beside it."""

    result: StoredResult
    converted: TaskResult
    folder: Path
    meta: ModelMeta
    ours: dict[str, Any]  # the provenance record's fields for this model


def export_results(results: Iterable[StoredResult], out: str | Path) -> ExportReport:
    """Write every exportable result under ``out``; the report lists the rest with reasons.

    An export replaces only files an export wrote: each model folder's provenance lists the files
    written into it (``WRITTEN``), and a file in the way that it does not list (mteb's own run of the
    same model at the same commit, in ``$MTEB_CACHE``) stops the export before anything is written."""
    out = Path(out)
    report = ExportReport()
    planned: list[_Planned] = []
    for result in results:
        converted = task_result(result)
        if isinstance(converted, str):
            report.skipped.append({"encoder": result.encoder, "task": result.task, "reason": converted})
            continue
        identity = result.encoder_identity["hash"]
        training = result.encoder_metadata.get("training")
        facts = model_facts(result.encoder_identity, result.encoder_metadata, training)
        meta = model_meta(
            result.encoder,
            identity,
            result.encoder_identity,
            result.encoder_metadata.get("similarity", "cosine"),
            export=True,
            training=training,
            facts=facts,
        )
        ours = {
            "encoder": result.encoder,
            "identity": identity,
            "name_reason": export_name(result.encoder, identity, result.encoder_identity)[2],
            **({"card_datasets": list(facts.card_datasets)} if facts.card_datasets else {}),
        }
        folder = out / RESULTS / meta.model_name_as_path() / str(meta.revision)
        planned.append(_Planned(result, converted, folder, meta, ours))
    records = {p.folder: _record(p.folder) for p in planned}
    for p in planned:
        for name in (f"{p.converted.task_name}.json", MODEL_META):
            _check_ours(p.folder, name, records[p.folder])
    for p in planned:
        record = records[p.folder]
        path = p.folder / f"{p.converted.task_name}.json"
        write_json(path, p.converted.model_dump(mode="json"))
        write_json(p.folder / MODEL_META, p.meta.to_dict())
        written = sorted({*record.get(WRITTEN, []), path.name, MODEL_META})
        applied = dict(record.get("prompts_applied", {}))
        if p.result.encoder_metadata.get("prompts_applied"):
            applied[p.converted.task_name] = p.result.encoder_metadata["prompts_applied"]
        records[p.folder] = {**p.ours, **({"prompts_applied": applied} if applied else {}), WRITTEN: written}
        write_json(p.folder / PROVENANCE, records[p.folder])
        report.exported.append(
            {"encoder": p.result.encoder, "task": p.result.task, "mteb_task": p.converted.task_name, "path": str(path)}
        )
    return report


def _record(folder: Path) -> dict[str, Any]:
    """The provenance an earlier export left in ``folder`` (``{}`` where there is none): the files it
    lists are the ones an export may replace."""
    path = folder / PROVENANCE
    if not os.path.lexists(path):
        return {}
    record: object = None
    if path.is_file() and not path.is_symlink():
        with contextlib.suppress(OSError, UnicodeDecodeError, json.JSONDecodeError):
            record = json.loads(path.read_text(encoding="utf-8"))
    written = record.get(WRITTEN) if isinstance(record, dict) else None
    if not isinstance(written, list) or not all(isinstance(name, str) for name in written):
        raise InvalidInputError(
            f"{path} does not list the files `benchharness export mteb` wrote beside it (an older export's "
            f"record, or not an export's), so they may not be its own; export to another folder, or remove {folder} "
            "if an export made it"
        )
    return cast(dict[str, Any], record)


def _check_ours(folder: Path, name: str, record: dict[str, Any]) -> None:
    """Refuse to replace ``folder/name`` unless an earlier export wrote it (``record`` lists it)."""
    path = folder / name
    if os.path.lexists(path) and name not in record.get(WRITTEN, []):
        raise InvalidInputError(
            f"{path} exists and was not written by `benchharness export mteb`; nothing was exported: "
            "export to another folder, or move that file away"
        )
