"""A trained encoder held in memory: what ``benchharness.train`` returns.

It is an ``Encoder`` that encodes exactly as the ``hf`` family encodes the folder its run would be
saved to (the same module, pooling and truncation), so ``benchharness.evaluate`` takes it as it is
and scores it as it scores that folder; its name is the one ``train(name=...)`` gave (else
``trained:`` and its recipe's), its identity its weights, as for any model in memory.
:meth:`TrainedEncoder.save` writes the folder ``benchharness train --out`` writes, which
``SentenceTransformer(folder)`` loads as it is.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.errors import InvalidInputError
from benchharness.core.manifests import RunManifest
from benchharness.encoders.in_memory import TransformersModelEncoder
from benchharness.training.method import TrainedRun

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def selected_encoder(run: TrainedRun) -> PreTrainedModel:
    """The encoder a run selected: the module itself in memory, else the model its folder holds."""
    if run.out is None or run.manifest is None or run.manifest["selection"]["rule"] == "final weights":
        return run.encoder
    from benchharness.encoders.checkpoint import load_complete

    return load_complete(run.out / run.manifest["encoder"]["model"], str(run.out))


class TrainedEncoder(TransformersModelEncoder):
    """A trained run's encoder, its record (``manifest``, with the ``recipe``), its training log
    (``metrics``) and, for a method that trains in rounds (DefSent+), every round's encoder
    (``rounds``, the last being this one)."""

    def __init__(self, name: str, run: TrainedRun) -> None:
        if run.manifest is None:
            raise InvalidInputError(f"{name}: the run stopped before its end and has no trained encoder")
        spec = run.manifest["encoder"]
        encoder = selected_encoder(run)
        super().__init__(name, encoder, run.tokenizer, spec["pooling"], max_length=spec["max_length"])
        self.manifest: RunManifest = run.manifest
        self.metrics = run.metrics
        self.files = run.files
        self.rounds: list[TrainedEncoder] = [self]
        self.provenance = {k: v for k, v in run.manifest.items() if k != "encoder"}

    @property
    def recipe(self) -> dict[str, Any]:
        """The recipe that trained it (``Recipe.record``): method, base, every option, its key."""
        return dict(self.manifest.get("recipe", {}))

    def save(self, folder: str | Path, name: str | None = None) -> Path:
        """Write the run's folder, as ``benchharness train --out <folder>`` leaves it: the model's
        files, which ``SentenceTransformer(folder)`` loads, beside ``manifest.json`` (the run named
        ``name``, default: as training named it) and ``metrics.jsonl``; ``benchharness run --encoders
        <folder>`` evaluates it. A folder that already holds files is refused."""
        from benchharness.training.outputs import write_run

        out = Path(folder).expanduser()
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise InvalidInputError(f"{out} exists and is not an empty folder; choose another folder to save into")
        manifest = copy.deepcopy(self.manifest)
        manifest["name"] = name or manifest.get("name") or out.resolve().name
        write_run(out, self._model, self._tokenizer, manifest, self.metrics, self.files)
        return out
