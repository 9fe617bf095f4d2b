"""Run manifests: the ``manifest.json`` a trained or tuned run leaves in its folder, and the runs
folder that registers them by name. Read by the resolver, by training (a run can be a base) and
by tuning (which writes one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Required, TypedDict

from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.specs import EncoderSpec

MANIFEST = "manifest.json"


class RunManifest(TypedDict, total=False):
    """The ``manifest.json`` of a trained or tuned run, as far as name resolution reads it
    (training manifests hold more: the recipe, which results copy into their metadata)."""

    encoder: Required[EncoderSpec]
    name: str
    method: str
    base_model: str
    date: str
    #: a tuned run's dev-set grid and choice (``benchharness tune``)
    tuning: dict[str, Any]
    #: a trained run's recipe, with the ``command`` that trains it
    recipe: dict[str, Any]


def read_manifest(folder: Path) -> RunManifest:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if "encoder" not in manifest:
        raise InvalidInputError(f"{path}: not a benchharness run manifest (no 'encoder' entry)")
    return manifest


def manifest_spec(folder: Path, manifest: RunManifest) -> EncoderSpec:
    """A trained run's encoder spec with its model path made absolute. A run whose weights are gone
    (the folder kept, ``model/`` deleted) is refused here with the command that trains it again,
    before a model loader reads the path as a hub id."""
    spec: EncoderSpec = dict(manifest["encoder"])  # type: ignore[assignment]
    for key in ("model", "file"):
        if key in spec and not Path(spec[key]).is_absolute():
            path = folder / spec[key]
            if not path.exists():
                raise MissingFileError(f"{folder}: the run's {spec[key]} is gone (deleted or moved); "
                                       f"{_retrain_hint(folder, manifest)}")
            spec[key] = str(path.resolve())
    return spec


def _retrain_hint(folder: Path, manifest: RunManifest) -> str:
    import shlex

    recipe = manifest.get("recipe") or {}
    if "command" not in recipe:
        return f"train it again into {folder}, or delete the folder"
    return (f"train it again with: {recipe['command']} --out {shlex.quote(str(folder))} --overwrite "
            "(from the folder it was trained in), or delete the folder")


def registered_runs(runs_dir: Path) -> dict[str, Path]:
    """Manifests under the runs folder, by the name they declare (else their folder name)."""
    runs: dict[str, Path] = {}
    if runs_dir.is_dir():
        for manifest in sorted(runs_dir.glob(f"*/{MANIFEST}")):
            try:
                name = json.loads(manifest.read_text()).get("name") or manifest.parent.name
            except json.JSONDecodeError:
                continue
            runs[name] = manifest.parent
    return runs
