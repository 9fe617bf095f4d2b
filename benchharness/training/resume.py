"""What makes a run resumable and its output safe to read: the checkpoint (method, optimizer,
scheduler, scaler, RNG states, loop position) and the output folder's states.

Everything is written through ``benchharness.core.atomic``: a run killed mid-write leaves the previous
checkpoint intact, never half of one. Resuming restores every RNG, so a resumed run
reproduces the uninterrupted one step for step.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from benchharness.core.atomic import atomic_file
from benchharness.core.errors import InvalidInputError
from benchharness.core.manifests import CHECKPOINT as CHECKPOINT_DIR
from benchharness.core.manifests import CHECKPOINT_STATE as CHECKPOINT_FILE
from benchharness.core.manifests import MANIFEST as MANIFEST_FILE
from benchharness.core.manifests import check_clearable, clear_run, is_run_entry, listed
from benchharness.training.options import TrainingOptions
from benchharness.training.settings import RECORDED, RESUMABLE, RUNTIME

if TYPE_CHECKING:
    from benchharness.training.method import TrainingMethod

#: the defaults of the shared options and of the recorded run-time keys, for checkpoints written before
#: a setting existed
FIELD_DEFAULTS: dict[str, Any] = {
    **{f.name: f.default for f in fields(TrainingOptions)},
    **{k: RUNTIME[k].default for k in RECORDED if k in RUNTIME and k != "out"},
}


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C during a run's training, with what it leaves: the steps done, the step of the
    checkpoint its folder keeps (None: none yet; one is written every ``every`` steps), so that the
    command line can say in one line what is kept and how to go on. Nothing is saved at the
    interruption itself: the step it cut short may be half applied."""

    def __init__(self, out: Path | None, step: int, checkpoint: int | None, every: int) -> None:
        super().__init__(out, step, checkpoint, every)
        self.out, self.step, self.checkpoint, self.every = out, step, checkpoint, every

    def __str__(self) -> str:
        if self.out is None:
            return f"interrupted after step {self.step}; a run trained in memory keeps nothing"
        if self.checkpoint is None:
            return (
                f"interrupted after step {self.step}, before the run's first checkpoint (one every {self.every} "
                f"steps): nothing in {self.out} to resume; rerun the same command with --overwrite to start again"
            )
        return (
            f"interrupted after step {self.step}; the checkpoint of step {self.checkpoint} is kept in {self.out}; "
            "rerun the same command to resume"
        )


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse now, before any model loads, an output folder the loop would refuse: with ``overwrite``,
    one that :func:`clear_run` must not clear (the user's own files, the working directory or a
    parent of it); without, one that holds files but neither a run to resume nor a finished one."""
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} is a file; give a folder")
    if overwrite:
        check_clearable(out)
        return
    if not out.is_dir() or (out / MANIFEST_FILE).exists() or (out / CHECKPOINT_DIR / CHECKPOINT_FILE).exists():
        return
    entries = [p.name for p in out.iterdir()]
    if entries and not any(is_run_entry(name) for name in entries):
        raise InvalidInputError(
            f"{out} holds {listed(sorted(entries))} and no run; train into a new or empty folder (choose another --out)"
        )
    if entries:
        raise InvalidInputError(
            f"{out} holds an unfinished run with no checkpoint to resume (stopped before its first); "
            "pass --overwrite to start it again"
        )


def prepare_out(out: Path, overwrite: bool) -> Path | None:
    """Create the output folder; return the checkpoint to resume from, if any. ``overwrite`` first
    deletes what an earlier run wrote there, and only that (:func:`clear_run`)."""
    check_out(out, overwrite)
    if overwrite:
        clear_run(out)
    if (out / MANIFEST_FILE).exists():
        raise InvalidInputError(f"{out} already holds a finished run ({MANIFEST_FILE}); pass --overwrite to retrain")
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / CHECKPOINT_DIR / CHECKPOINT_FILE
    return ckpt if ckpt.exists() else None


def rng_state() -> dict[str, Any]:
    """Every generator's state as tensors and plain values, which ``torch.load(weights_only=True)``
    reads back without unpickling arbitrary objects (numpy's key array travels as a tensor)."""
    # the legacy tuple (get_state's default); numpy's stub also allows the dict of legacy=False
    name, keys, pos, has_gauss, cached = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    state = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    out: Path,
    config: dict[str, Any],
    method: TrainingMethod,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler,
    state: dict[str, Any],
    rank_rngs: list[dict[str, Any]] | None = None,
) -> None:
    """Everything the loop needs to continue exactly where it is, in ``<out>/checkpoint/state.pt``.

    A data-parallel run saves from rank 0 (model and optimizer are the same on every rank) with
    ``rank_rngs``, every rank's generators in rank order: each rank draws its own dropout and
    augmentations, and resumes them from its own state."""
    saved: dict[str, Any] = {
        "config": config,
        "method": method.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "state": state,
        "rng": rng_state(),
    }
    if rank_rngs is not None:
        saved["rank_rngs"] = rank_rngs
    with atomic_file(out / CHECKPOINT_DIR / CHECKPOINT_FILE, "wb") as fh:
        torch.save(saved, fh)


def load_checkpoint(
    path: Path,
    config: dict[str, Any],
    method: TrainingMethod,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    scaler: torch.amp.GradScaler,
    rank: int = 0,
) -> dict[str, Any]:
    """Restore a checkpoint made with the same settings into the given objects and the RNGs (``rank``'s
    own, in a data-parallel run); returns the loop state. Other settings are refused: the resumed run
    would be neither."""
    try:  # weights_only: a checkpoint is data, and one from a shared runs folder must not run code
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling refused, truncated or random bytes: torch raises several kinds
        raise InvalidInputError(
            f"{path}: not a checkpoint this harness can resume safely ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200]}); delete {path.parent} to train from the start"
        ) from None
    # a checkpoint that does not record a setting was made with that setting's default behaviour
    # (``optimizer``: torch-adamw)
    # (``nproc``: 1, which a single-process config leaves out of its record, on both sides)
    made_with = {**FIELD_DEFAULTS, **saved["config"]}
    now = {**FIELD_DEFAULTS, **config}
    diffs = [
        f"{k}: {made_with.get(k)!r} -> {now.get(k)!r}"
        for k in dict.fromkeys([*now, *made_with])
        if k not in RESUMABLE and made_with.get(k) != now.get(k)
    ]
    if diffs:
        raise InvalidInputError(
            f"{path}: the checkpoint was made with other settings ({'; '.join(diffs)}); "
            "pass the same settings to resume, or --overwrite to start again"
        )
    method.load_state_dict(saved["method"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    scaler.load_state_dict(saved["scaler"])
    set_rng_state(saved["rank_rngs"][rank] if "rank_rngs" in saved else saved["rng"])
    return saved["state"]


def remove_checkpoint(out: Path) -> None:
    if (out / CHECKPOINT_DIR).exists():
        shutil.rmtree(out / CHECKPOINT_DIR)
