"""Where a training run's outputs go: an output folder, or nowhere but memory.

The loop hands every output to one of these: its metrics, the best encoder so far, its checkpoints,
the finished run's record. :class:`FolderOutput` writes the folder that ``benchharness train --out``
leaves (resumable, registered by its manifest); :class:`MemoryOutput` keeps what the run needs in
memory and writes nothing, for ``benchharness.train()`` without ``out=``, and puts the selected
weights back into the module. A finished folder is a sentence-transformers model, with the
harness's record beside the model's files::

    <out>/config.json, model.safetensors, tokenizer files   the encoder (save_pretrained)
    <out>/modules.json, 1_Pooling/, ...                     how sentence-transformers pools it, as evaluated
    <out>/manifest.json                                     the run's typed record, which makes the folder an encoder
    <out>/metrics.jsonl                                     one JSON object per logged step / evaluation
    <out>/checkpoint/                                       the resumable state (``resume.py``), removed at the end

While the run trains, the selected encoder so far waits in ``checkpoint/model/`` (the module, on
every rank of a data-parallel run alike, ends with its final weights); the finished run moves its
files up beside the manifest, so they are written once. (The names are ``core.manifests.RUN_ENTRIES``
and ``MODEL_ENTRIES``: all that ``--overwrite`` may delete. A folder written before this layout keeps
its model in ``model/``, which still loads.)
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from benchharness.core.atomic import atomic_dir, atomic_file, write_text
from benchharness.core.manifests import CHECKPOINT, METRICS, MODEL, RunManifest
from benchharness.encoders.checkpoint import quiet_loading
from benchharness.encoders.sentence_transformers_format import EXPORTABLE, save_as_sentence_transformer
from benchharness.training.manifest import write_manifest
from benchharness.training.method import TrainingMethod
from benchharness.training.resume import prepare_out, remove_checkpoint, save_checkpoint


def encoder_state(method: TrainingMethod) -> dict[str, torch.Tensor]:
    """A copy of the encoder's weights on the CPU (the training heads are not kept)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in method.encoder.state_dict().items()}


class MemoryOutput:
    """Outputs kept in memory: the metric records and the best encoder's weights. Nothing is
    written, so nothing can be resumed (``stop_after`` needs an output folder)."""

    def __init__(self) -> None:
        self.metrics: list[dict[str, Any]] = []
        self._best: dict[str, torch.Tensor] | None = None

    def prepare(self, overwrite: bool) -> Path | None:
        return None

    def log(self, record: dict[str, Any]) -> None:
        self.metrics.append(record)

    def keep_best(self, method: TrainingMethod) -> None:
        self._best = encoder_state(method)

    def checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to resume from without a folder."""

    def restore_best(self, method: TrainingMethod) -> None:
        """The selected weights back into the module (the last evaluation need not be the best)."""
        if self._best is not None:
            method.encoder.load_state_dict(self._best)

    def save_final(self, method: TrainingMethod) -> None:
        """Without dev selection the module's final weights are the encoder: nothing to keep."""

    def has_model(self) -> bool:
        """Whether the selected encoder is kept (in memory: the module itself)."""
        return True

    def finish(self, method: TrainingMethod, manifest: RunManifest, keep_checkpoint: bool) -> list[dict[str, Any]]:
        return list(self.metrics)


class FolderOutput(MemoryOutput):
    """Outputs written to the run's folder as they come: the metrics log line by line, the best
    encoder whenever the dev score improves, resumable checkpoints; at the end the encoder's files
    beside sentence-transformers' and the manifest."""

    def __init__(self, out: Path) -> None:
        super().__init__()
        self.folder = out
        self.staged = out / CHECKPOINT / MODEL

    def prepare(self, overwrite: bool) -> Path | None:
        return prepare_out(self.folder, overwrite)

    def log(self, record: dict[str, Any]) -> None:
        """Append one line of the metrics log; a full disk is named as this file's (the write that
        fails may be the flush at ``close``, whose error carries no file name)."""
        path = self.folder / METRICS
        try:
            with path.open("a", encoding="utf8") as fh:
                fh.write(json.dumps(record) + "\n")
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None

    def keep_best(self, method: TrainingMethod) -> None:
        save_encoder(method.encoder, method.tokenizer, self.staged)

    def checkpoint(self, *args: Any, **kwargs: Any) -> None:
        save_checkpoint(self.folder, *args, **kwargs)

    def restore_best(self, method: TrainingMethod) -> None:
        """The selected weights are the folder's; the module keeps its final ones."""

    def save_final(self, method: TrainingMethod) -> None:
        save_encoder(method.encoder, method.tokenizer, self.staged)

    def has_model(self) -> bool:
        return self.staged.is_dir() or (self.folder / MODEL).is_dir()  # model/: a run begun before this layout

    def finish(self, method: TrainingMethod, manifest: RunManifest, keep_checkpoint: bool) -> list[dict[str, Any]]:
        """The encoder's files moved up beside the manifest, sentence-transformers' added, the
        manifest written, the checkpoint removed unless kept; the whole metrics log, earlier
        invocations' lines included."""
        legacy = self.folder / MODEL  # where a run begun before this layout kept its selected encoder
        staged = self.staged if self.staged.is_dir() else legacy
        for entry in sorted(staged.iterdir()):
            os.replace(entry, self.folder / entry.name)
        staged.rmdir()
        shutil.rmtree(legacy, ignore_errors=True)
        write_run_files(self.folder, manifest, {})
        if not keep_checkpoint:
            remove_checkpoint(self.folder)
        path = self.folder / METRICS
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def save_encoder(encoder: Any, tokenizer: Any, folder: Path) -> None:
    """The encoder and tokenizer (never the training heads) into ``folder``, replaced whole."""
    with atomic_dir(folder) as tmp, quiet_loading():  # no "Writing model shards" bar
        encoder.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)


def write_run_files(out: Path, manifest: RunManifest, files: dict[str, bytes]) -> None:
    """What makes ``out`` (which holds the encoder's files) a finished run: sentence-transformers'
    files, pooled as the run is evaluated (where that pooling exists there), a method's other files,
    and last the manifest, which registers the folder."""
    spec = manifest["encoder"]
    if spec.get("pooling") in EXPORTABLE:  # loadable by SentenceTransformer(out), pooled as evaluated
        save_as_sentence_transformer(out, {"pooling": spec["pooling"], "max_length": spec["max_length"]})
    for name, content in files.items():
        with atomic_file(out / name, "wb") as fh:
            fh.write(content)
    write_manifest(out, manifest)


def write_run(
    out: Path,
    encoder: Any,
    tokenizer: Any,
    manifest: RunManifest,
    metrics: list[dict[str, Any]],
    files: dict[str, bytes],
) -> None:
    """A trained run held in memory, written as ``benchharness train --out`` leaves its folder, its
    weights written once."""
    out.mkdir(parents=True, exist_ok=True)
    with quiet_loading():
        encoder.save_pretrained(out)
        tokenizer.save_pretrained(out)
    write_text(out / METRICS, "".join(json.dumps(record) + "\n" for record in metrics))
    write_run_files(out, manifest, files)
