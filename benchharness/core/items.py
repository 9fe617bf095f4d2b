"""Per-item outputs stored beside their result: ``<results>/<encoder>/<task>.items.npz``.

A result JSON links its items file by name and sha256 (``Result.items``); the arrays are those of
``benchharness.core.task.Evaluation`` (cosines and per-query values as float64, labels and indices as
small integers), compressed. They let intervals and paired comparisons be recomputed without the
encoder. Loading checks the digest, so a comparison never silently uses outputs that no longer
belong to the result that links them.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from benchharness.core.atomic import atomic_file
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.task import ITEM_KINDS, Evaluation

SUFFIX = ".items.npz"


class ItemsRecord(TypedDict):
    """What a result keeps about its items file: where it is (beside the JSON), its digest, how to
    read it and how many items it holds."""

    file: str
    sha256: str
    kind: str
    n: int


class MissingItemsError(MissingFileError):
    """A result has no usable per-item outputs; the message says which command produces them."""


def items_path(result_json: Path) -> Path:
    return result_json.with_name(result_json.name.removesuffix(".json") + SUFFIX)


def save_items(result_json: Path, evaluation: Evaluation) -> ItemsRecord:
    """Write the arrays atomically beside ``result_json`` and return the record that links them."""
    if evaluation.kind not in ITEM_KINDS:
        raise InvalidInputError(f"unknown kind of per-item outputs {evaluation.kind!r}; expected one of {ITEM_KINDS}")
    buffer = io.BytesIO()
    # allow_pickle=False, as load_items reads: an object array fails here, not at every later read; and
    # an item named allow_pickle is refused instead of being taken for the flag and dropped
    np.savez_compressed(buffer, allow_pickle=False, **evaluation.items)
    data = buffer.getvalue()
    path = items_path(result_json)
    with atomic_file(path, "wb") as fh:
        fh.write(data)
    n = max(len(v) for k, v in evaluation.items.items() if k != "subset_names")
    return {"file": path.name, "sha256": hashlib.sha256(data).hexdigest(), "kind": evaluation.kind, "n": int(n)}


def _check_record(result_json: Path, record: dict[str, Any]) -> None:
    """A record as ``save_items`` writes it: a file name beside the result (never a path elsewhere),
    a sha256 and a kind, all strings; anything else is a damaged or edited result file."""
    wrong = next((key for key in ("file", "sha256", "kind") if not isinstance(record.get(key), str)), None)
    if wrong is None and (Path(record["file"]).name != record["file"] or record["file"] in ("", "..")):
        wrong = "file"
    if wrong is not None:
        raise InvalidInputError(
            f"{result_json}: its items record is damaged ({wrong!r} is "
            f"{json.dumps(record.get(wrong))[:60]}); delete the result to recompute"
        )


def load_items(result_json: Path, record: dict[str, Any] | None, rerun_hint: str) -> Evaluation:
    """The stored items of the result at ``result_json`` (metrics left empty), checked against
    ``record``; ``rerun_hint`` is the command that would produce them, named in the error."""
    if not record:
        raise MissingItemsError(
            f"{result_json} has no per-item outputs (stored before they were kept); produce them with: {rerun_hint}"
        )
    _check_record(result_json, record)
    path = result_json.with_name(record["file"])
    if not path.exists():
        raise MissingItemsError(f"{path} (linked from {result_json}) is missing; produce it with: {rerun_hint}")
    if not path.is_file():  # a FIFO would block the read for ever
        raise InvalidInputError(f"{path}: not a regular file; recompute with: {rerun_hint}")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != record["sha256"]:
        raise MissingItemsError(
            f"{path} has sha256 {digest[:12]}..., but {result_json} links "
            f"{record['sha256'][:12]}...; it belongs to another run. Recompute with: {rerun_hint}"
        )
    try:  # never unpickled: an object array is refused, not run
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(
            f"{path}: not per-item outputs benchharness can read ({exc}); recompute with: {rerun_hint}"
        ) from None
    problem = _array_problem(arrays)
    if problem is not None:
        raise InvalidInputError(
            f"{path}: not per-item outputs benchharness wrote ({problem}); recompute with: {rerun_hint}"
        )
    return Evaluation({}, arrays, record["kind"])


def _array_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """What is wrong with arrays read back, if anything: ``save_items`` writes 1-D arrays, of
    finite numbers except the names (``subset_names``), so text cosines (which sort as text) or a
    NaN never reach a statistic."""
    for key, array in arrays.items():
        if array.ndim != 1:
            return f"{key!r} has shape {array.shape}"
        if key == "subset_names":
            continue
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
            return f"{key!r} holds {array.dtype} values, not numbers"
        if np.issubdtype(array.dtype, np.inexact) and not np.isfinite(array).all():
            return f"{key!r} holds {int((~np.isfinite(array)).sum())} non-finite value(s)"
    return None
