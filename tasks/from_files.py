"""Tasks declared from files: a researcher's own sentence pairs, labelled sentences, retrieval
corpus or reranking lists, run, compared, listed and ranked like a built-in task.

Four kinds. The symmetric two are each one file evaluated by the code of a built-in family, so
that its protocol is that family's exactly:

- ``pairs``: sentence pairs with gold scores under the STS protocol of ``tasks.sts`` (cosine, a zero
  vector scoring 0; Pearson and Spearman; per-item outputs of kind ``sts``, so that bootstrap
  intervals and ``compare`` work); main score ``spearman``, as STS-B's.
- ``labels``: sentences with class labels under SentEval's logistic regression with nested
  stratified k-fold, as MR (``tasks.transfer.BinaryTask``, here with n classes; the ``default``
  classifier config unless ``config = "fast"``); main score ``acc``; per-item outputs of kind
  ``classification``. Labels are strings or integers; class ids follow their sorted order
  (numeric when every label is an integer, ``7`` or ``"7"``), recorded in the protocol.

The asymmetric two (``benchharness.tasks.ranking_files``) encode queries in the query role and
candidates in the document role, and score as BEIR and mteb do; per-item outputs of kind
``ranking`` (one per-query array per metric):

- ``retrieval``: a BEIR folder (``folder = "..."``: ``corpus.jsonl``, ``queries.jsonl``,
  ``qrels/<split>.tsv``, ``split`` defaulting to ``test``; ``benchharness.data.beir`` reads it);
  each query's 100 nearest documents by cosine, searched exactly one corpus block at a time;
  nDCG@10 (main), MAP@100, MRR@10 and recall@100 by pytrec_eval's definitions with graded
  relevance (``benchharness.scoring.graded``). A document is title + " " + text (mteb's join);
  queries without a relevant judgement are dropped, and counted in the protocol.
- ``reranking``: JSON lines ``{"query": ..., "positive": [...], "negative": [...]}`` (mteb's
  reranking format; ``query``/``positive``/``negative`` rename the keys); each line's candidates
  ranked by cosine; MAP (main) and MRR@10 as mteb's ``RerankingEvaluator``.

Every kind takes ``instruction = "..."``: the task's ``TaskMetadata.instruction``, which reaches
the query side of a model that takes prompts or instructions (``core.prompts``), and is recorded
in the result's protocol. The symmetric kinds ask for their sentences in the default role, which
carries no instruction: for them it is recorded only.

A file is CSV (RFC 4180 quoting), TSV (one record per line, fields split on tabs, no quoting: the
format of SentEval's and STS-B's files) or JSON lines (one object per line), told by its suffix
(``.csv``, ``.tsv``, ``.jsonl``/``.json``) or by ``format``; a CSV or TSV file starts with a header
naming its columns. The encoder gets each sentence exactly as the file holds it: the file is the
researcher's data, so nothing is re-joined or lowercased (``tasks.sts`` re-joins SentEval's tokens
because SentEval did). Items follow the file's rows (MR's sort by length is not applied), so the
per-item outputs line up with the file.

Declared in ``benchharness.toml`` (``core.settings`` reads the tables)::

    [tasks.my-pairs]
    file = "pairs.csv"                 # relative to the config file; the file may live anywhere
    score_range = [0, 5]               # optional: every gold score must lie in it

    [tasks.my-labels]
    kind = "labels"
    file = "intents.jsonl"
    text = "utterance"                 # column names; defaults sentence / label

    [tasks.my-beir]
    kind = "retrieval"
    folder = "scifact"                 # a BEIR folder; split = "dev" reads qrels/dev.tsv
    instruction = "Given a claim, retrieve documents that support or refute it"

    [tasks.my-rerank]
    kind = "reranking"
    file = "rerank.jsonl"

or from Python with :func:`register_file_task` (those win over the configuration's of the same
name). The file is read directly, not through the data root; ``task.files`` lists it (a BEIR
folder's three files), so that its sha256 enters the result (which names it by its file name
alone). A problem in a file raises
``DataError`` naming the file and line; a problem in a declaration raises ``InvalidInputError``
naming where it was declared.

Names: a file task may not take a name that another task plugin's provider already answers to (a
task, group or alias, compared case-insensitively as ``--tasks`` matches them, or a prefix such as
``mteb:``), since one would silently hide the other: such a table of the configuration is left out
with a warning naming both, ``register_file_task`` refuses such a name. Only providers that are
plain objects are checked: those rebuilt at every lookup, as this one, cannot be asked without
recursion. A name is at most ``NAME_MAX`` characters (it names result files).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError
from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import PLUGINS
from benchharness.core.results import SLUG_MAX
from benchharness.core.settings import Config
from benchharness.core.task import Embed, Task, TaskProvider
from benchharness.tasks import sts, warn_once
from benchharness.tasks.file_base import GROUP, TEXT, Declaration, FileTask, Row, sentence
from benchharness.tasks.ranking_files import FileRerankingTask, FileRetrievalTask
from benchharness.tasks.senteval_config import CONFIGS, ClassifierConfig
from benchharness.tasks.transfer import BinaryTask

#: protocol variants; the leaderboard finds file tasks by their ``file-`` prefix
PAIRS_PROTOCOL = "file-pairs-cosine"
LABELS_PROTOCOL = "file-senteval-logreg"  # + "-<config>", as the transfer tasks' senteval-logreg-<config>
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
#: per kind, its column keys with their default column names, then its other keys
COLUMNS = {
    "pairs": {"sentence1": "sentence1", "sentence2": "sentence2", "score": "score"},
    "labels": {"text": "sentence", "label": "label"},
    "retrieval": {},
    "reranking": {"query": "query", "positive": "positive", "negative": "negative"},
}
OPTIONS = {"pairs": ("format", "score_range"), "labels": ("format", "config"), "retrieval": ("split",), "reranking": ()}
#: the key that names a kind's data, when it is not ``file``
SOURCE = {"retrieval": "folder"}
#: keys every kind takes
COMMON = ("kind", "instruction")
#: a BEIR split names its qrels file (``qrels/<split>.tsv``)
SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: the classification items store class ids as int8 (``TransferTask.evaluate_items``)
MAX_CLASSES = 127
#: a task name becomes a result file name (``results/<encoder>/<task>.json``) and a ``--tasks`` item
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
#: the longest task name: the result store's limit on the folder names it makes, well under 255 bytes
NAME_MAX = SLUG_MAX
INTEGER = re.compile(r"[+-]?[0-9]+")


# ------------------------------------------------------------------------------------------------
# declarations


def declare(name: str, entry: Mapping[str, Any], origin: str) -> Declaration:
    """Check one declaration (a ``[tasks.<name>]`` table or ``register_file_task``'s arguments);
    ``origin`` says where it was made, for the error."""
    kind = entry.get("kind", "pairs")
    if kind not in COLUMNS:
        raise InvalidInputError(f"{origin}: kind {kind!r}; use {', '.join(map(repr, COLUMNS))}")
    source = SOURCE.get(kind, "file")
    allowed = {source, *COMMON, *COLUMNS[kind], *OPTIONS[kind]}
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise InvalidInputError(
            f"{origin}: unknown key(s) {', '.join(unknown)} for kind {kind!r}; "
            f"the keys are {', '.join(sorted(allowed))}"
        )
    _check_name(name, origin)
    if source not in entry:
        raise InvalidInputError(f'{origin}: kind {kind!r} needs {source} = "..."')
    path = Path(entry[source])
    fmt = {"retrieval": "beir", "reranking": "jsonl"}.get(kind) or _format(path, entry.get("format"), origin)
    return Declaration(
        name,
        path,
        kind,
        fmt,
        {key: entry.get(key, default) for key, default in COLUMNS[kind].items()},
        _score_range(entry.get("score_range"), origin),
        _config(entry.get("config", "default"), origin),
        split=_split(entry.get("split", "test"), origin) if kind == "retrieval" else None,
        instruction=_instruction(entry.get("instruction"), origin),
    )


def _check_name(name: str, origin: str) -> None:
    """A name makes a result file (``<task>.json``, ``<task>.items.npz``) and a ``--tasks`` item:
    checked where it is declared, so that no run does its work and then fails to store it."""
    if not NAME.fullmatch(name):
        raise InvalidInputError(
            f"{origin}: task name {name!r}; use letters, digits and . _ + - (it names result files)"
        )
    if len(name) > NAME_MAX:
        raise InvalidInputError(
            f"{origin}: task name of {len(name)} characters; use at most {NAME_MAX} (it names result files)"
        )


def _refuse_clash(name: str, origin: str) -> None:
    clash = _clash(name)
    if clash is not None:
        raise InvalidInputError(f"{origin}: task name {name!r} is taken by {clash}; choose another name")


def _clash(name: str) -> str | None:
    """What ``name`` already means to ``--tasks`` (see the module docstring), if anything."""
    key = name.lower()
    if key == GROUP:
        return f"the group {GROUP!r} of the tasks from files"
    for plugin, provider in PLUGINS.load_all("tasks").items():
        if callable(provider):  # rebuilt at every lookup (this module's among them): not asked
            continue
        for what, table in (("task", provider.tasks), ("group", provider.groups), ("alias", provider.aliases)):
            match = next((n for n in table if n.lower() == key), None)
            if match is not None:
                return f"the {what} {match!r} of the {plugin!r} task plugin"
        if provider.prefix and key.startswith(provider.prefix.lower()):
            return f"the prefix {provider.prefix!r} of the {plugin!r} task plugin"
    return None


def _format(path: Path, fmt: Any, origin: str) -> str:
    if fmt is None and path.suffix.lower() not in FORMATS:
        raise InvalidInputError(
            f'{origin}: cannot tell the format of {path.name} from its suffix; add format = "csv", "tsv" or "jsonl"'
        )
    fmt = FORMATS[path.suffix.lower()] if fmt is None else fmt
    if fmt not in ("csv", "tsv", "jsonl"):
        raise InvalidInputError(f"{origin}: format {fmt!r}; use csv, tsv or jsonl")
    return fmt


def _score_range(value: Any, origin: str) -> tuple[float, float] | None:
    if value is None:
        return None
    numbers = (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    )
    if not numbers or not value[0] < value[1]:
        raise InvalidInputError(f"{origin}: score_range {value!r}; give [low, high] with low < high")
    return float(value[0]), float(value[1])


def _split(value: Any, origin: str) -> str:
    if not isinstance(value, str) or not SPLIT.fullmatch(value):
        raise InvalidInputError(
            f"{origin}: split {value!r}; give the name of a qrels file (qrels/<split>.tsv), letters, digits and . _ -"
        )
    return value


def _instruction(value: Any, origin: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidInputError(f"{origin}: instruction {value!r}; give non-empty text")
    return value


def _config(name: Any, origin: str) -> ClassifierConfig:
    if name not in CONFIGS:
        raise InvalidInputError(f"{origin}: config {name!r}; use one of {', '.join(CONFIGS)}")
    return CONFIGS[name]


#: tasks declared from Python, by name
REGISTERED: dict[str, Declaration] = {}


def register_file_task(name: str, file: str | Path, kind: str = "pairs", **options: Any) -> None:
    """Declare a task from a file in Python (a relative ``file`` is relative to the working
    directory; for ``kind="retrieval"`` it is the BEIR folder); ``options`` are the other keys of a
    ``[tasks.<name>]`` table. It lasts for the process.
    A name another task plugin answers to is refused here, where it is asked for."""
    entry = {SOURCE.get(kind, "file"): Path(file).expanduser().resolve(), "kind": kind, **options}
    origin = f"register_file_task({name!r})"
    _refuse_clash(name, origin)
    REGISTERED[name] = declare(name, entry, origin)


def provider(config: Config | None = None) -> TaskProvider:
    """The ``files`` task plugin of a configuration: its ``[tasks.*]`` (none without one), then
    those declared from Python.

    A table named as another plugin's task (``[tasks.STSBenchmark]``, perhaps written before that
    plugin was installed) is left out with a warning naming both: the name keeps meaning the
    built-in task, whose stored results and leaderboard rows it names, and every other task and
    command still works. An invalid table (a bad name, kind, key) fails the whole plugin, before any
    work: ``benchharness.tasks.catalogue`` then leaves the file tasks out and names the error."""
    declared: dict[str, Declaration] = {}
    tables, file = (config.tasks, config.file) if config is not None else ({}, None)
    for name, entry in tables.items():
        origin = f"{file}: [tasks.{name}]"
        clash = _clash(name)
        if clash is not None:
            warn_once(f"{origin} is left out: {name!r} is taken by {clash}; rename the table to run its file")
            continue
        declared[name] = declare(name, entry, origin)
    declared.update(REGISTERED)
    factories: dict[str, Callable[[], Task]] = {name: partial(KINDS[d.kind], d) for name, d in declared.items()}
    return TaskProvider(tasks=factories, groups={GROUP: list(declared)}, order=80)


# ------------------------------------------------------------------------------------------------
# checking values


def _score(path: Path, line: int, value: Any, column: str, score_range: tuple[float, float] | None) -> float:
    try:
        score = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        score = math.nan
    if not math.isfinite(score):
        raise DataError(f"{path}:{line}: score {value!r} in {column!r} is not a number")
    if score_range is not None and not score_range[0] <= score <= score_range[1]:
        raise DataError(
            f"{path}:{line}: score {score:g} in {column!r} is outside score_range "
            f"[{score_range[0]:g}, {score_range[1]:g}]"
        )
    return score


def _label(path: Path, line: int, value: Any, column: str) -> int | str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise DataError(f"{path}:{line}: label {value!r} in {column!r}; a label is non-empty text or an integer")


def class_labels(labels: list[int | str]) -> list[int | str]:
    """Each label as its class is named: an integer when every label is one (``7`` or ``"7"``, so
    that 2 sorts before 10), else text."""
    if all(isinstance(v, int) or INTEGER.fullmatch(v) for v in labels):
        return [int(v) for v in labels]
    return [str(v) for v in labels]


def _check_classes(path: Path, labels: list[int | str], config: ClassifierConfig) -> None:
    counts = Counter(labels)
    if not 2 <= len(counts) <= MAX_CLASSES:
        raise DataError(f"{path}: {len(counts)} class(es); a labelled task needs 2 to {MAX_CLASSES}")
    label, fewest = min(counts.items(), key=lambda kv: kv[1])
    if fewest < config.kfold:
        raise DataError(
            f"{path}: class {label!r} has {fewest} sentence(s); the {config.kfold}-fold "
            f"cross-validation of the {config.name!r} config needs at least {config.kfold} per class"
        )


# ------------------------------------------------------------------------------------------------
# tasks


@dataclass(frozen=True)
class Pairs:
    a: list[str]
    b: list[str]
    gold: list[float]

    @property
    def n(self) -> int:
        return len(self.gold)


@dataclass(frozen=True)
class Labelled:
    texts: list[str]
    labels: list[int]  # class ids
    classes: list[int | str]  # the label of each class id

    @property
    def n(self) -> int:
        return len(self.texts)


class FilePairTask(FileTask, sts.PairTask):
    """Scored pairs, under the STS protocol of ``tasks.sts`` with STS-B's metrics."""

    #: STS-B's metrics: Pearson and Spearman over the one set of pairs, and their number
    _metrics = sts.CsvPairTask._metrics

    def __init__(self, decl: Declaration) -> None:
        super().__init__()
        self.decl = decl
        # the family's metadata (similarity, main score as STS-B's); the file completes it
        self.metadata = sts._pair_meta(
            decl.name,
            f"sentence pairs with gold scores from {decl.path}, unsupervised cosine",
            "all",
            0,
            (GROUP,),
            protocol=PAIRS_PROTOCOL,
            text=TEXT,
        )

    def _read(self, rows: list[Row]) -> Pairs:
        path, cols = self.decl.path, self.decl.columns
        if len(rows) < 2:
            raise DataError(f"{path}: {len(rows)} pair(s); a correlation needs at least 2")
        s1, s2, score = cols["sentence1"], cols["sentence2"], cols["score"]
        pairs = Pairs([], [], [])
        for line, rec in rows:  # row by row: the first problem in the file is the one reported
            pairs.a.append(sentence(path, line, rec[s1], s1))
            pairs.b.append(sentence(path, line, rec[s2], s2))
            pairs.gold.append(_score(path, line, rec[score], score, self.decl.score_range))
        return pairs

    def _use(self, content: Pairs) -> None:
        self.subsets = {"test": (content.a, content.b, np.asarray(content.gold))}

    def _details(self, content: Pairs) -> dict[str, Any]:
        rng = self.decl.score_range
        return {"score_range": None if rng is None else list(rng)}


class FileLabelTask(FileTask, BinaryTask):
    """Labelled sentences, under MR's protocol (nested stratified k-fold) with n classes."""

    def __init__(self, decl: Declaration) -> None:
        self.decl = decl
        # the family's metadata (classifier config, validation scheme); the file completes it
        super().__init__(
            decl.name,
            (decl.path.name, decl.path.name),
            0,
            decl.config,
            f"sentences with class labels from {decl.path}, SentEval logistic regression",
        )
        self.metadata = replace(
            self._declared,
            name=decl.name,
            split="all",
            groups=(GROUP,),
            protocol=f"{LABELS_PROTOCOL}-{decl.config.name}",
        )

    def _read(self, rows: list[Row]) -> Labelled:
        path, cols = self.decl.path, self.decl.columns
        text_col, label_col = cols["text"], cols["label"]
        texts, written = [], []
        for line, rec in rows:  # row by row: the first problem in the file is the one reported
            texts.append(sentence(path, line, rec[text_col], text_col))
            written.append(_label(path, line, rec[label_col], label_col))
        labels = class_labels(written)
        _check_classes(path, labels, self.decl.config)
        classes: list[int | str] = sorted(set(labels))  # all int or all str
        ids = {label: i for i, label in enumerate(classes)}
        return Labelled(texts, [ids[label] for label in labels], classes)

    def _use(self, content: Labelled) -> None:
        self.texts, self.labels, self.nclasses = content.texts, np.asarray(content.labels), len(content.classes)

    def _details(self, content: Labelled) -> dict[str, Any]:
        return {"labels": content.classes, "class_ids": "the labels' sorted order"}

    def _classify(self, embed: Embed, seed: int) -> dict[str, Any]:
        """``BinaryTask._classify`` with this file's number of classes (MR's is fixed at 2)."""
        from benchharness.tasks.senteval_classifier import inner_kfold  # torch and scikit-learn: only to classify

        out = inner_kfold(embed(self.texts), self.labels, self.nclasses, self.config, seed)
        return {**out, "ndev": len(self.texts), "ntest": len(self.texts)}


#: kind -> the task class, built from its declaration
KINDS: dict[str, Callable[[Declaration], FileTask]] = {
    "pairs": FilePairTask,
    "labels": FileLabelTask,
    "retrieval": FileRetrievalTask,
    "reranking": FileRerankingTask,
}
