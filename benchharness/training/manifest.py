"""``manifest.json``: what a trained encoder is, where it came from and how to load it.

The loop builds it at the end of a run (``loop.py``). The resolver reads ``name`` and ``encoder``
(the spec ``{"type": "hf", "model": ".", ...}`` that makes the run folder an encoder: its model's
files are the folder's own, ``model/`` in runs written before); the rest is provenance for whoever
reads a result: base model and weights, data, every hyper-parameter, the code version, the dev curve and how the saved
weights were selected, and what the training cost. The record's type is the one run manifest
type (``core.manifests.RunManifest``), which readers of any run share; ``schema_version`` changes
when the keys written here change.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import torch

from benchharness.core.atomic import write_json
from benchharness.core.manifests import MANIFEST, CodeVersion, RunManifest
from benchharness.core.provenance import git_state

SCHEMA_VERSION = 1


@functools.cache
def code_version() -> CodeVersion:
    """Versions of the code and its main libraries, with the checkout's commit.

    Cached, and first called when training starts: the manifest must name the code this process
    loaded, not whatever the checkout holds when a round (hours later) writes its manifest.
    """
    import transformers

    from benchharness.core.version import __version__

    git = git_state()
    return {
        "benchharness": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
    }


def write_manifest(folder: Path, manifest: RunManifest) -> None:
    write_json(folder / MANIFEST, manifest)


def update_manifest(folder: Path, **extra: Any) -> RunManifest:
    """Add keys to a finished run's manifest (a method's own outputs, such as plots)."""
    manifest: RunManifest = json.loads((folder / MANIFEST).read_text())
    manifest.update(extra)  # type: ignore[typeddict-item]
    write_manifest(folder, manifest)
    return manifest
