"""One JSON file per (encoder, task), written atomically, with everything needed to reproduce it.

Layout: ``<results_dir>/<encoder slug>/<task>.json``. Top-level keys follow mteb's results files in
spirit: ``encoder``, ``task``, ``main_score`` (x100), ``metrics`` (every metric, x100 for scores),
then the protocol variant, the encoder's identity and metadata, the data checksum, versions, seed,
timings and date.

Existing results are never silently replaced; the overwrite strategy decides:
``reuse`` keeps any stored result, ``stale`` recomputes those whose encoder identity, data digest
or protocol differ from the current ones, ``always`` recomputes everything.

Schema versions: a file without a ``schema_version`` key loads as version 1; files written here
carry ``"schema_version": 2`` as their last key. The two differ only in that key (and version 2
files never hold NaN, which is not JSON), so both load into ``Result``. Two optional keys need no
version change, because a file without them is still complete: ``items`` links the per-item
outputs stored beside the file (``<task>.items.npz``, ``benchharness.core.items``) and
``confidence`` holds the bootstrap intervals (``benchharness.scoring.confidence``); neither is part
of the fingerprint, so adding them never makes a result stale. ``benchharness run --add-items``
recomputes stored results that lack them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypedDict

from benchharness.core.atomic import write_json
from benchharness.core.errors import InvalidInputError
from benchharness.core.task import DataRecord, Evaluation, Metrics

OVERWRITE = ("reuse", "stale", "always")
#: folders of the results directory that hold other outputs (``benchharness analyze``), not encoders
RESERVED_FOLDERS = ("analysis", "benchmarks", "figures", "published")
#: written into every new result file; a file without the key is version 1
SCHEMA_VERSION = 2


class ProtocolRecord(TypedDict, total=False):
    """How the task was run: its variant, split and main metric, then the task's protocol details
    (whose keys differ from task to task)."""

    variant: str
    split: str
    main_score: str


class Timings(TypedDict, total=False):
    """Encoding is shared by the tasks of one pass, hence the ``_all_tasks`` keys; memory in MiB
    (the key keeps the name version 1 files use)."""

    encode_seconds_all_tasks: float
    sentences_encoded_all_tasks: int
    sentences_not_from_cache: int
    evaluate_seconds: float
    peak_rss_mb: float


#: longest folder name ``slug`` returns (well under the 255 bytes file systems allow)
SLUG_MAX = 150


def slug(name: str) -> str:
    """The folder name of an encoder name or spec: one-to-one, and never leaving its parent.

    A name made only of lowercase letters, digits and ``._+=,()-`` (every method and alias) is its
    own folder. Any other name (a spec with ``:``, ``/``, ``?``, capitals, ``.`` or ``..``, an
    overlong one) keeps a readable prefix of it and gets ``@`` and 12 hex digits of its sha256.
    ``@`` never occurs in a plain folder, so a plain name cannot meet a hashed one, and two hashed
    names meet only if their digests do; capitals are hashed so that names differing in case stay
    apart on case-insensitive file systems too. ``legacy_slug`` is the mapping of results stored
    before (``benchharness data migrate`` moves such folders).
    """
    if _PLAIN.fullmatch(name) and name.strip(".") and len(name) <= SLUG_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9._+=,()-]+", "_", name).strip("_.")[: SLUG_MAX - len(digest) - 1]
    return f"{readable}@{digest}" if readable else digest


def legacy_slug(name: str) -> str:
    """The lossy folder name of results written before ``slug`` became one-to-one."""
    safe = re.sub(r"[^A-Za-z0-9._+=,()-]+", "_", name).strip("_") or "encoder"
    if len(safe) <= SLUG_MAX and safe.strip("."):
        return safe
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{safe[: SLUG_MAX - len(digest) - 1]}-{digest}"


_PLAIN = re.compile(r"[a-z0-9._+=,()-]+")


@dataclass
class Result:
    encoder: str
    task: str
    main_score: float
    main_metric: str
    metrics: Metrics
    protocol: ProtocolRecord
    encoder_identity: dict[str, Any]
    encoder_metadata: dict[str, Any]
    data: DataRecord
    seed: int
    timings: Timings
    versions: dict[str, str | None]
    date: str
    #: counts about the vectors the task scored (``zero_vectors``: sentences encoded as all zeros,
    #: e.g. every word out of vocabulary); descriptive, outside the fingerprint; None in files without the key
    embedding_stats: dict[str, int | float] | None = None
    items: dict[str, Any] | None = None  # ItemsRecord of the per-item outputs file, if kept
    confidence: dict[str, Any] | None = None  # bootstrap intervals (benchharness.scoring.confidence)
    schema_version: int = SCHEMA_VERSION
    #: the per-item outputs themselves, when this result was computed in this process (a result
    #: read from a file links them through ``items`` instead); never written into the JSON
    per_item: Evaluation | None = field(default=None, repr=False, compare=False, metadata={"stored": False})

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: every stored field, in declaration order."""
        return {f.name: getattr(self, f.name) for f in STORED_FIELDS}

    def fingerprint(self) -> tuple[str, str, str]:
        """What must match for a stored result to stand for a fresh one."""
        return fingerprint(self.encoder_identity.get("hash", ""), self.data.get("sha256", ""), self.protocol)


#: the fields a result file holds (``per_item`` lives in memory only)
STORED_FIELDS = tuple(f for f in fields(Result) if f.metadata.get("stored", True))


def fingerprint(identity: str, data_sha256: str, protocol: ProtocolRecord) -> tuple[str, str, str]:
    return identity, data_sha256, json.dumps(protocol, sort_keys=True, default=str)


class ResultSink(Protocol):
    """Where a run keeps its results and finds those it may reuse: the on-disk ``ResultStore``,
    or ``MemoryStore`` (a Ray unit's private copy). A run given none stores and reuses nothing."""

    def load(self, encoder: str, task: str) -> Result | None: ...

    def save(self, result: Result) -> None: ...

    def has_items(self, result: Result) -> bool: ...

    def load_items(self, result: Result) -> Evaluation: ...


def items_of(result: Result, store: ResultSink | None) -> Evaluation:
    """A result's per-item outputs: those it carries, else those its store keeps."""
    from benchharness.core.items import MissingItemsError

    if result.per_item is not None:
        return result.per_item
    if store is None:
        raise MissingItemsError(
            f"the result of {result.encoder} on {result.task} carries no per-item outputs "
            "and comes from no results folder"
        )
    return store.load_items(result)


class MemoryStore:
    """Results held in memory, keyed by encoder and task, with their per-item outputs attached:
    the same reuse decisions as a folder, without one."""

    def __init__(self, results: list[Result] | None = None) -> None:
        self._results = {(r.encoder, r.task): r for r in results or []}

    def load(self, encoder: str, task: str) -> Result | None:
        return self._results.get((encoder, task))

    def save(self, result: Result) -> None:
        self._results[(result.encoder, result.task)] = result

    def has_items(self, result: Result) -> bool:
        return result.per_item is not None and bool(result.per_item.items)

    def load_items(self, result: Result) -> Evaluation:
        return items_of(result, None)


class ResultStore:
    """Result files under ``root``, one JSON per (encoder, task) with its per-item outputs beside it.

    ``configured``: the results folder a bare ``benchharness run`` writes to (the configuration's),
    so that a command this store prints names ``--results-dir`` only when it is another."""

    def __init__(self, root: str | Path, configured: str | Path = "results") -> None:
        self.root = Path(root)
        self.configured = Path(configured)
        #: per-item outputs already read, by file and digest: the leaderboard's marks, the report's
        #: significance matrix and the protocol spread each ask for the same ones
        self._items: dict[tuple[Path, str], Evaluation] = {}

    def path(self, encoder: str, task: str) -> Path:
        if not task.strip(".") or any(c in task for c in "/\\\0"):
            raise InvalidInputError(f"task name {task!r} cannot name a result file (separators, NUL, '.' or '..')")
        folder = slug(encoder)
        if folder in RESERVED_FOLDERS:
            raise InvalidInputError(
                f"encoder name {encoder!r} is reserved: results/{folder}/ holds other outputs; "
                "register the encoder under another name"
            )
        return self.root / folder / f"{task}.json"

    def load(self, encoder: str, task: str) -> Result | None:
        """The stored result of ``encoder`` on ``task``, or None. A file there that holds another
        encoder's or task's result (copied or renamed by hand) raises ``ResultMismatchError``."""
        p = self.path(encoder, task)
        if not p.exists():
            return None
        result = read_result(p)
        if result.encoder != encoder or result.task != task:
            raise ResultMismatchError(
                f"{p} holds the result of encoder {result.encoder!r} on {result.task!r}, "
                f"not {encoder!r} on {task!r} (moved there by hand?); it is "
                "treated as not stored"
            )
        return result

    def save(self, result: Result) -> None:
        """Write atomically (``benchharness.core.atomic``): a reader never sees half a file. The
        per-item outputs the result carries are written first and linked from the JSON."""
        p = self.path(result.encoder, result.task)
        record = result.items
        if result.per_item is not None and result.per_item.items:
            from benchharness.core.items import save_items  # numpy: not needed to read results

            record = dict(save_items(p, result.per_item))
        write_json(p, {**result.to_dict(), "items": record})
        result.items = record

    def has_items(self, result: Result) -> bool:
        """Whether the result links a per-item outputs file that is there."""
        if not result.items:
            return False
        return self.path(result.encoder, result.task).with_name(result.items["file"]).exists()

    def load_items(self, result: Result) -> Evaluation:
        """The per-item outputs of a result (those it carries, else its stored file's); the error
        names the command that produces them."""
        from benchharness.core.items import load_items

        if result.per_item is not None:
            return result.per_item
        path = self.path(result.encoder, result.task)
        key = (path, str((result.items or {}).get("sha256")))
        if key not in self._items:
            self._items[key] = load_items(
                path, result.items, self.run_command(result.encoder, result.task, "--add-items")
            )
        return self._items[key]

    def run_command(self, encoder: str, task: str, *flags: str) -> str:
        """The command that (re)computes ``encoder`` on ``task`` into this store, ready to paste."""
        import shlex

        quoted = f"'{encoder}'" if "'" not in encoder else shlex.quote(encoder)  # a spec holds ?, & and ()
        command = " ".join(["benchharness run --encoders", quoted, "--tasks", shlex.quote(task), *flags])
        if self.root.absolute() != self.configured.absolute():
            command += f" --results-dir {shlex.quote(str(self.root))}"
        return command

    def __iter__(self) -> Iterator[Result]:
        for p in sorted(self.root.glob("*/*.json")):
            if p.parent.name not in RESERVED_FOLDERS:
                yield read_result(p)


class ResultMismatchError(InvalidInputError):
    """A result file in the place of another encoder's or task's result."""


#: the JSON type each key of a result file must have; scores may be any number, counts integers
_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "encoder": (str,),
    "task": (str,),
    "main_score": _NUMBER,
    "main_metric": (str,),
    "metrics": (dict,),
    "protocol": (dict,),
    "encoder_identity": (dict,),
    "encoder_metadata": (dict,),
    "data": (dict,),
    "seed": (int,),
    "timings": (dict,),
    "versions": (dict,),
    "date": (str,),
    "embedding_stats": (dict, type(None)),
    "items": (dict, type(None)),
    "confidence": (dict, type(None)),
    "schema_version": (int,),
}


def read_result(path: Path) -> Result:
    """Load one result file; anything that is not a result (bad JSON, nesting deeper than Python's
    recursion limit, NaN or infinite numbers, which no stored result holds, missing or unknown keys,
    a value of the wrong type) raises ``ValueError`` naming the file and the key."""

    def no_constant(name: str) -> float:
        raise InvalidInputError(
            f"{path}: holds {name}, which no stored result has (the file was edited or damaged); delete it to recompute"
        )

    if path.exists() and not path.is_file():  # a FIFO would block the read for ever
        raise InvalidInputError(f"{path}: not a regular file; delete it to recompute")
    try:
        raw = json.loads(path.read_text(), parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{path}:{exc.lineno}: corrupt result file ({exc.msg}); delete it to recompute"
        ) from None
    except (UnicodeDecodeError, OSError) as exc:
        raise InvalidInputError(f"{path}: unreadable result file ({exc}); delete it to recompute") from None
    except InvalidInputError:  # from no_constant
        raise
    except (RecursionError, ValueError) as exc:  # nested beyond the recursion limit; an integer of 4,300+ digits
        what = "JSON nested too deeply to read" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidInputError(f"{path}: not a benchharness result ({what}); delete it to recompute") from None
    if not isinstance(raw, dict):
        raise InvalidInputError(
            f"{path}: not a benchharness result (a JSON {type(raw).__name__}, expected an object); "
            "delete it to recompute"
        )
    raw.setdefault("schema_version", 1)  # files from before the key existed
    names = {f.name for f in STORED_FIELDS}
    unknown = sorted(set(raw) - names)
    missing = sorted(f.name for f in STORED_FIELDS if f.name not in raw and f.default is MISSING)
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"unknown keys {', '.join(unknown)}")
        if missing:
            parts.append(f"missing keys {', '.join(missing)}")
        what = "; ".join(parts)
        raise InvalidInputError(f"{path}: not a benchharness result ({what}); delete it to recompute")
    for key, types in _FIELD_TYPES.items():
        value = raw.get(key)
        if key in raw and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            expected = (
                "number"
                if types == _NUMBER
                else " or ".join(
                    "null" if t is type(None) else {"str": "string", "dict": "object", "int": "integer"}[t.__name__]
                    for t in types
                )
            )
            raise InvalidInputError(
                f"{path}: key {key!r} is {json.dumps(value)[:60]}, expected {expected}; "
                "the file is damaged: delete it to recompute"
            )
    if not abs(raw["main_score"]) < float("inf"):  # 1e999 reads as infinity
        raise InvalidInputError(
            f"{path}: main_score is {raw['main_score']}, not a finite number; the file is "
            "damaged: delete it to recompute"
        )
    return Result(**raw)
