"""Tasks declared from files: a researcher's own sentence pairs, labelled sentences, retrieval
corpus or reranking lists, run, compared, listed and ranked like a built-in task.

Four kinds. The symmetric two are each one file evaluated by the code of a built-in family, so
that its protocol is that family's exactly:

- ``pairs``: sentence pairs with gold scores under the STS protocol of ``tasks.sts`` (cosine, a zero
  vector scoring 0; Pearson and Spearman; per-item outputs of kind ``sts``, so that bootstrap
  intervals and ``compare`` work); main score ``spearman``, as STS-B's.
- ``labels``: sentences with class labels under SentEval's logistic regression with nested
  stratified k-fold, as MR (``tasks.senteval.transfer.BinaryTask``, here with n classes; the ``default``
  classifier config unless ``config = "fast"``); main score ``acc``; per-item outputs of kind
  ``classification``. Labels are strings or integers; class ids follow their sorted order
  (numeric when every label is an integer, ``7`` or ``"7"``), recorded in the protocol.

The asymmetric two (``benchharness.tasks.files.ranking``) encode queries in the query role and
candidates in the document role, and score as BEIR and mteb do; per-item outputs of kind
``ranking`` (one per-query array per metric):

- ``retrieval``: a BEIR folder (``folder = "..."``: ``corpus.jsonl``, ``queries.jsonl``,
  ``qrels/<split>.tsv``, ``split`` defaulting to ``test``; ``benchharness.tasks.files.beir`` reads it);
  each query's 100 nearest documents by cosine, searched exactly one corpus block at a time;
  nDCG@10 (main), MAP@100, MRR@10 and recall@100 by pytrec_eval's definitions with graded
  relevance (``benchharness.scoring.graded``). A document is title + " " + text (mteb's join);
  queries without a relevant judgement are dropped, and counted in the protocol. ``search = "int8"``
  or ``"binary"`` searches a quantized index instead (``benchharness.scoring.quantized_search``),
  ``rescore = m`` rescores its best 100 x m by the float query.
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

import os
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import PLUGINS
from benchharness.core.results import SLUG_MAX
from benchharness.core.settings import Config
from benchharness.core.task import Task, TaskProvider
from benchharness.scoring.quantized_search import SEARCH_PRECISIONS
from benchharness.tasks import warn_once
from benchharness.tasks.files.base import GROUP, Declaration, FileTask
from benchharness.tasks.files.labels import FileLabelTask
from benchharness.tasks.files.pairs import FilePairTask
from benchharness.tasks.files.ranking import FileRerankingTask, FileRetrievalTask
from benchharness.tasks.senteval.config import CONFIGS, ClassifierConfig

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
#: per kind, its column keys with their default column names, then its other keys
COLUMNS = {
    "pairs": {"sentence1": "sentence1", "sentence2": "sentence2", "score": "score"},
    "labels": {"text": "sentence", "label": "label"},
    "retrieval": {},
    "reranking": {"query": "query", "positive": "positive", "negative": "negative"},
}
OPTIONS = {
    "pairs": ("format", "score_range"),
    "labels": ("format", "config"),
    "retrieval": ("split", "search", "rescore"),
    "reranking": (),
}
#: the key that names a kind's data, when it is not ``file``
SOURCE = {"retrieval": "folder"}
#: keys every kind takes
COMMON = ("kind", "instruction")
#: a BEIR split names its qrels file (``qrels/<split>.tsv``)
SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: a task name becomes a result file name (``results/<encoder>/<task>.json``) and a ``--tasks`` item
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
#: the longest task name: the result store's limit on the folder names it makes, well under 255 bytes
NAME_MAX = SLUG_MAX


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
        **(_search(entry.get("search", "float32"), entry.get("rescore"), origin) if kind == "retrieval" else {}),
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


def _search(precision: Any, rescore: Any, origin: str) -> dict[str, Any]:
    if precision not in SEARCH_PRECISIONS:
        raise InvalidInputError(f"{origin}: search {precision!r}; use {', '.join(SEARCH_PRECISIONS)}")
    if rescore is not None and (
        precision == "float32" or not isinstance(rescore, int) or isinstance(rescore, bool) or rescore < 1
    ):
        raise InvalidInputError(
            f'{origin}: rescore {rescore!r}; give a whole number of at least 1, with search = "int8" or "binary"'
        )
    return {"search": precision, "rescore": rescore}


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
    entry = {SOURCE.get(kind, "file"): Path(os.path.abspath(Path(file).expanduser())), "kind": kind, **options}
    origin = f"register_file_task({name!r})"
    _refuse_clash(name, origin)
    REGISTERED[name] = declare(name, entry, origin)


def provider(config: Config | None = None) -> TaskProvider:
    """The ``files`` task plugin of a configuration: its ``[tasks.*]`` (none without one), then
    those declared from Python.

    A table named as another plugin's task (``[tasks.STSBenchmark]``, perhaps written before that
    plugin was installed) is left out with a warning naming both: the name keeps meaning the
    built-in task, whose stored results and leaderboard rows it names, and every other task and
    command still works. An invalid table (a bad name, kind, key) is left out alone, with a warning
    saying why; asking for its name gives that reason (``TaskProvider.refused``)."""
    declared: dict[str, Declaration] = {}
    refused: dict[str, str] = {}
    tables, file = (config.tasks, config.file) if config is not None else ({}, None)
    files = config.task_files if config is not None else {}  # the per-user file's tasks are its own
    for name, entry in tables.items():
        origin = f"{files.get(name, file)}: [tasks.{name}]"
        clash = _clash(name)
        if clash is not None:
            warn_once(f"{origin} is left out: {name!r} is taken by {clash}; rename the table to run its file")
            continue
        try:
            declared[name] = declare(name, entry, origin)
        except InvalidInputError as exc:
            refused[name] = str(exc)
            warn_once(f"{exc}; that table is left out, the other tasks are not")
    declared.update(REGISTERED)
    factories: dict[str, Callable[[], Task]] = {name: partial(KINDS[d.kind], d) for name, d in declared.items()}
    refused = {name: why for name, why in refused.items() if name not in declared}
    return TaskProvider(tasks=factories, groups={GROUP: list(declared)}, order=80, refused=refused)


#: kind -> the task class, built from its declaration
KINDS: dict[str, Callable[[Declaration], FileTask]] = {
    "pairs": FilePairTask,
    "labels": FileLabelTask,
    "retrieval": FileRetrievalTask,
    "reranking": FileRerankingTask,
}
