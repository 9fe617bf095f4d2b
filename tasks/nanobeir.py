"""NanoBEIR: thirteen BEIR retrieval tasks cut to 50 queries and a few thousand documents each
(Zeta Alpha's collection, as sentence-transformers' ``NanoBEIREvaluator`` reads it), and the group
``nanobeir`` whose score is their unweighted mean, as that evaluator aggregates it.

Each dataset is a BEIR folder of the data root, ``nanobeir/Nano<Name>/`` (``corpus.jsonl``,
``queries.jsonl``, ``qrels/test.tsv``, and ``source.json``: where it came from), scored by the BEIR
folder protocol (``tasks.files.ranking``: exact search, nDCG@10 main, MAP@100, MRR@10, recall@100,
per-query items), so every model kind and every pipeline runs it as it runs a BEIR folder.

A missing folder is downloaded when the task first loads, unless the process is offline
(``HF_HUB_OFFLINE``, or ``hf_offline`` of benchharness.toml): ``datasets.load_dataset`` of
``sentence-transformers/NanoBEIR-en`` (the evaluator's default), subsets ``corpus``, ``queries``
and ``qrels``, split ``Nano<Name>``, at the commit the hub names at that moment (kept in
``source.json``). Offline, a missing folder fails in one line saying how to get it.

The rows become a BEIR folder as the evaluator reads them: a document is its ``text`` (the
evaluator reads no title), a document or query whose text is empty is left out (its
``len(text) > 0``), a qrels row makes its document relevant with gain 1 (NanoBEIR's qrels carry no
score; a row's ``corpus-id`` may be a list), and a judgement naming a document or query left out
is dropped and counted in ``source.json`` (the evaluator would keep it as a relevant document no
model can find).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from benchharness.core.atomic import atomic_dir
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import UnavailableDataError
from benchharness.core.settings import Config, default_data_dir, default_hub
from benchharness.core.task import BoardSection, Task, TaskProvider
from benchharness.tasks.files.base import Declaration
from benchharness.tasks.files.beir import CORPUS, QRELS, QRELS_HEADER, QUERIES, beir_files
from benchharness.tasks.files.ranking import FileRetrievalTask
from benchharness.tasks.senteval.config import CONFIGS

logger = logging.getLogger(__name__)

GROUP = "nanobeir"
#: where sentence-transformers' NanoBEIREvaluator reads the collection by default
DATASET_ID = "sentence-transformers/NanoBEIR-en"
#: the data root's folder of the thirteen datasets
FOLDER = "nanobeir"
SPLIT = "test"
SOURCE_FILE = "source.json"
PROTOCOL = "nanobeir-retrieval-cosine"
REFERENCE = (
    "NanoBEIR (Zeta Alpha, 2024), read as sentence-transformers' NanoBEIREvaluator reads it; BEIR's "
    "metrics by pytrec_eval's definitions"
)
#: the evaluator's datasets, in its order: the name it is asked by, then the name of its split
DATASETS = (
    "ClimateFEVER",
    "DBPedia",
    "FEVER",
    "FiQA2018",
    "HotpotQA",
    "MSMARCO",
    "NFCorpus",
    "NQ",
    "QuoraRetrieval",
    "SCIDOCS",
    "ArguAna",
    "SciFact",
    "Touche2020",
)
BOARD = BoardSection(
    "NanoBEIR (nDCG@10 x100; Avg.: their unweighted mean, as NanoBEIREvaluator)", order=60, average=True
)

#: a hub dataset's rows of one subset: ``load(repo, subset, split, revision)``
Loader = Callable[[str, str, str, str | None], Iterable[Mapping[str, Any]]]


def task_name(dataset: str) -> str:
    return f"Nano{dataset}"


def folder_of(root: Path, dataset: str) -> Path:
    return root / FOLDER / task_name(dataset)


class NotDownloadedError(DataError, UnavailableDataError):
    """Offline, a NanoBEIR dataset missing from the data root; the run tells those of the group in one line."""

    def __init__(self, dataset: str, folder: Path) -> None:
        self.dataset, self.folder = dataset, folder
        super().__init__(
            f"NanoBEIR's {dataset} is not in the data root ({folder} is missing) and this process is offline "
            f"(HF_HUB_OFFLINE, or hf_offline in benchharness.toml): {_FETCH} {DATASET_ID} split {task_name(dataset)} "
            "there, or write its BEIR folder there"
        )

    def __reduce__(self) -> tuple[type, tuple[str, Path]]:  # rebuilt from its fields, not its message
        return type(self), (self.dataset, self.folder)

    @classmethod
    def summary(cls, failed: Sequence[tuple[str, UnavailableDataError]], loaded: Sequence[str]) -> str:
        folders = {str(error.folder.parent) for _, error in failed if isinstance(error, NotDownloadedError)}
        return (
            f"{len(failed)} NanoBEIR datasets ({', '.join(name for name, _ in failed)}) are not in "
            f"{', '.join(sorted(folders))} and this process is offline (HF_HUB_OFFLINE, or hf_offline in "
            f"benchharness.toml): {_FETCH} {DATASET_ID} there, or write their BEIR folders there"
        )


#: how a missing dataset is fetched, as the offline errors say it
_FETCH = "run once online (HF_HUB_OFFLINE=0 where the configuration sets it), which downloads"


class NanoBEIRTask(FileRetrievalTask):
    """One NanoBEIR dataset: the BEIR folder protocol on ``<data root>/nanobeir/Nano<Name>/``,
    downloaded at the first load when it is missing and the process is online."""

    board_section = BOARD

    def __init__(self, dataset: str, root: Path, offline: bool) -> None:
        self.dataset, self.offline, self.board_header = dataset, offline, dataset
        name = task_name(dataset)
        decl = Declaration(name, folder_of(root, dataset), "retrieval", "beir", {}, None, CONFIGS["default"], SPLIT)
        super().__init__(decl)
        declared = self.declared
        self.metadata = replace(
            declared,
            description=f"NanoBEIR's {dataset}: its queries against its corpus, cosine",
            protocol=PROTOCOL,
            reference=REFERENCE,
            groups=(GROUP,),
            protocol_details={**declared.protocol_details, "source": f"{DATASET_ID}, split {name}"},
        )

    def _load(self, data: DataRoot) -> None:
        """Read the folder of ``data``'s root (fetched first when missing and online)."""
        folder = folder_of(data.root, self.dataset)
        if folder != self.decl.path:
            self.decl = replace(self.decl, path=folder)
            self.__dict__.pop("content", None)  # read from this root, not the one listing looked at
        if not all(f.is_file() for f in beir_files(folder, SPLIT)):
            if self.offline:
                raise NotDownloadedError(self.dataset, folder)
            download(self.dataset, folder)
        super()._load(data)

    def _data_files(self) -> list[Path]:
        return beir_files(self.decl.path, SPLIT)

    def _summary(self) -> tuple[int, dict[str, Any]]:
        if "content" not in self.__dict__ and not self._data_files()[2].is_file():
            raise DataError(f"{self.decl.path} is missing: a first run online downloads it from {DATASET_ID}")
        return super()._summary()


def download(dataset: str, folder: Path, revision: str | None = None, load: Loader | None = None) -> Path:
    """Fetch one NanoBEIR dataset from the hub into ``folder`` as a BEIR folder (online), at
    ``revision`` (default: the commit the hub names now); a failed download is one line naming the
    dataset, and leaves no folder behind. ``load``: where the rows come from (default
    ``datasets.load_dataset``)."""
    split = task_name(dataset)
    rows_of: Loader = load or _load_rows
    try:
        if load is None:
            from huggingface_hub import HfApi

            revision = HfApi().dataset_info(DATASET_ID, revision=revision).sha
        logger.info("downloading NanoBEIR's %s (%s, split %s, revision %s)", dataset, DATASET_ID, split, revision)
        rows = {subset: rows_of(DATASET_ID, subset, split, revision) for subset in ("corpus", "queries", "qrels")}
        return write_folder(folder, rows, {"dataset": DATASET_ID, "split": split, "revision": revision})
    except DataError:
        raise
    except Exception as exc:  # offline, a moved dataset, a changed schema: say which and what to do
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise DataError(
            f"could not download NanoBEIR's {dataset} from {DATASET_ID} (split {split}): {reason}; check the "
            f"network connection, or write its BEIR folder into {folder}"
        ) from None


def _load_rows(repo: str, subset: str, split: str, revision: str | None) -> Iterable[Mapping[str, Any]]:
    """One subset's rows of one split, through the Hugging Face datasets library and its cache."""
    from datasets import load_dataset

    return load_dataset(repo, subset, split=split, revision=revision)


def write_folder(folder: Path, rows: Mapping[str, Iterable[Mapping[str, Any]]], source: Mapping[str, Any]) -> Path:
    """The hub's ``corpus``, ``queries`` and ``qrels`` rows as a BEIR folder, with ``source.json``
    saying where they came from and what was left out (see the module docstring); atomic, so that a
    download cut short leaves nothing that passes for the dataset."""
    corpus, empty_documents = _texts(rows["corpus"], "corpus")
    queries, empty_queries = _texts(rows["queries"], "queries")
    judged: dict[tuple[str, str], None] = {}
    dropped = 0
    for row in rows["qrels"]:
        targets = row["corpus-id"] if isinstance(row["corpus-id"], list) else [row["corpus-id"]]
        for target in targets:
            query, document = str(row["query-id"]), str(target)
            if query in queries and document in corpus:
                judged[(query, document)] = None
            else:
                dropped += 1
    if not judged:
        raise DataError(f"{DATASET_ID} split {source.get('split')}: no judgement names a query and a document kept")
    with atomic_dir(folder) as tmp:
        (tmp / QRELS).mkdir()
        (tmp / CORPUS).write_text(
            "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in corpus.items()), encoding="utf-8"
        )
        (tmp / QUERIES).write_text(
            "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries.items()), encoding="utf-8"
        )
        lines = ["\t".join(QRELS_HEADER), *(f"{q}\t{d}\t1" for q, d in judged)]
        (tmp / QRELS / f"{SPLIT}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        record = {
            **source,
            "documents": len(corpus),
            "queries": len(queries),
            "judgements": len(judged),
            "left_out": {"empty_documents": empty_documents, "empty_queries": empty_queries, "judgements": dropped},
        }
        (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return folder


def _texts(rows: Iterable[Mapping[str, Any]], subset: str) -> tuple[dict[str, str], int]:
    """Texts by id (the first row of an id kept), and how many rows were left out for an empty text."""
    texts: dict[str, str] = {}
    empty = 0
    for row in rows:
        text = row["text"]
        if not isinstance(text, str):
            raise DataError(f"{DATASET_ID} {subset}: row {row.get('_id')!r} has text {text!r}; expected text")
        if text:
            texts.setdefault(str(row["_id"]), text)
        else:
            empty += 1
    return texts, empty


def provider(config: Config | None = None) -> TaskProvider:
    """The ``nanobeir`` task plugin: the thirteen datasets under the configuration's data root
    (``$BENCHHARNESS_DATA``, else ``[paths] data_dir``), downloaded unless it is offline, and the
    group whose mean is their score."""
    root = config.data_root() if config is not None else default_data_dir()
    offline = (config.hub() if config is not None else default_hub()).offline
    factories: dict[str, Callable[[], Task]] = {task_name(d): partial(NanoBEIRTask, d, root, offline) for d in DATASETS}
    return TaskProvider(tasks=factories, groups={GROUP: list(factories)}, order=50, means=(GROUP,))
