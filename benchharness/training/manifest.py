"""``manifest.json``: what a trained encoder is, where it came from and how to load it.

The resolver reads ``name`` and ``encoder`` (the spec ``{"type": "hf", "model": "model", ...}``
that makes the run folder an encoder); the rest is provenance for whoever reads a result: base
model and weights, data, every hyper-parameter, the code version, the dev curve and how the saved
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
from benchharness.core.manifests import CodeVersion, RunManifest, Selection, TrainingStats
from benchharness.core.provenance import git_state, now
from benchharness.core.resources import peak_memory
from benchharness.encoders import hub
from benchharness.training import matryoshka
from benchharness.training.method import TrainingContext, TrainingMethod
from benchharness.training.options import TrainingOptions
from benchharness.training.resume import MANIFEST_FILE, MODEL_DIR

SCHEMA_VERSION = 1

#: settings that say where or how fast a run went, not what it trained: kept out of the
#: manifest's hyper-parameters
NOT_HYPERPARAMETERS = (
    "base",
    "out",
    "data",
    "name",
    "device",
    "threads",
    "stop_after",
    "overwrite",
    "progress",
    "keep_checkpoint",
)


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


def build_manifest(
    method: TrainingMethod,
    options: TrainingOptions,
    context: TrainingContext,
    state: dict[str, Any],
    data: dict[str, Any],
    source: hub.ModelSource,
    pooling: str,
    steps: int,
    warmup: int,
    device: torch.device,
    precision: str,
    dev_task: str | None,
) -> RunManifest:
    """The manifest of a finished run; ``state`` is the loop's (step, epoch, dev curve, best...). A run
    in memory has the name its context gives, else its method's."""
    settings = {**options.shared(), **context.record()}
    hyper = {k: v for k, v in settings.items() if k not in NOT_HYPERPARAMETERS}
    hyper.update({"total_steps": steps, "warmup_steps": warmup, **method.hyperparameters()})
    if options.matryoshka_dims is not None:
        hyper["matryoshka_loss"] = matryoshka.DESCRIPTION
    seconds = state["train_seconds"]
    selection: Selection = (
        {
            "rule": "best STS-B dev spearman over evaluations after step 0",
            "best_step": state["best_step"],
            "best_dev_spearman": state["best_dev"],
        }
        if options.eval_every is not None and state["best_step"] is not None
        else {"rule": "final weights", "best_step": state["step"]}
    )
    memory = peak_memory(device)
    training: TrainingStats = {
        "steps": state["step"],
        "epochs_completed": state["epoch"],
        "batches_into_next_epoch": state["batch_in_epoch"],
        "stopped_early": state["stopped_early"],
        "train_seconds": round(seconds, 2),
        "sentences": state["sentences"],
        "sentences_per_second": round(state["sentences"] / max(seconds, 1e-9), 2),
        "device": str(device),
        "precision": precision,
        "torch_threads": torch.get_num_threads(),
        "peak_rss_mib": round(memory["peak_rss_mib"], 1),
    }
    if "peak_cuda_mib" in memory:
        training["peak_cuda_mib"] = round(memory["peak_cuda_mib"], 1)
    return {
        "schema_version": SCHEMA_VERSION,
        "name": context.name or (context.out.resolve().name if context.out is not None else method.method_name),
        "method": method.method_name,
        "base_model": source.name,
        "base_revision": source.revision,
        "base_weights_sha256": source.weights_sha256,
        "data": {**data, "data_root": str(context.data.root)},  # where the corpus and the dev split were read
        "hyperparameters": hyper,
        "code_version": code_version(),
        "dev_task": dev_task if state["dev_curve"] else None,
        "dev_curve": state["dev_curve"],
        "selection": selection,
        "training": training,
        "encoder": {"type": "hf", "model": MODEL_DIR, "pooling": pooling, "max_length": options.eval_max_length},
        "date": now(),  # when the weights were saved: an export's release date (mteb's ModelMeta)
    }


def write_manifest(folder: Path, manifest: RunManifest) -> None:
    write_json(folder / MANIFEST_FILE, manifest)


def update_manifest(folder: Path, **extra: Any) -> RunManifest:
    """Add keys to a finished run's manifest (a method's own outputs, such as plots)."""
    manifest: RunManifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest.update(extra)  # type: ignore[typeddict-item]
    write_manifest(folder, manifest)
    return manifest
