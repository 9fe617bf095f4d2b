"""Where trained recipes live: one folder per recipe key, shared by every checkout of a machine.

::

    <runs root>/<method>/<key>/recipe.json   the recipe (``Recipe.record``), written before training
    <runs root>/<method>/<key>/.lock         held (flock) while a process trains the recipe
    <runs root>/<method>/<key>/run/          the trained encoder (the loop's output folder), or
    <runs root>/<method>/<key>/run-r<k>/     round k of a DefSent+ run
    <runs root>/<name>                       a link to a run trained elsewhere (``train --out d --name N``)

The runs root is ``benchharness.core.settings``'s ``runs_dir`` (``BENCHHARNESS_RUNS``, else ``[paths]
runs_dir``, else the XDG data folder), outside the checkout by default, so a recipe trained by one
checkout is reused by all. The key comes from the recipe, so two recipes never share a folder and
a recipe is never trained twice; the lock makes a second process wait for the first one's run
instead of training the same recipe beside it. A run trained into a folder of the user's choice is
registered under its name by a link beside them, which is how ``run --encoders <name>`` finds it
(``core.manifests.registered_runs``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from benchharness.core.atomic import write_json
from benchharness.core.errors import InvalidInputError
from benchharness.core.manifests import CHECKPOINT, CHECKPOINT_STATE, MANIFEST, clear_run, registered_runs

logger = logging.getLogger(__name__)

RECIPE_FILE = "recipe.json"
LOCK_FILE = ".lock"
RUN_DIR = "run"


class NotTrainedError(InvalidInputError):
    """A recipe asked for without its run, where training it now is not allowed."""


class Recipe(Protocol):
    """What the store needs of a recipe (``benchharness.training.recipes.Recipe``): where its run
    goes and what to record; the store itself never builds one (read-only members: a frozen
    dataclass's fields match them)."""

    @property
    def method(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def display_name(self) -> str: ...

    @property
    def rounds(self) -> int | None: ...

    @property
    def encoder_round(self) -> int | None: ...

    def record(self) -> dict[str, Any]: ...


class RunStore:
    """The trained runs of recipes under one runs root."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()

    def folder(self, recipe: Recipe) -> Path:
        return self.root / recipe.method / recipe.key

    def out(self, recipe: Recipe) -> Path:
        """The output folder the training command writes (DefSent+ writes ``run-r<k>`` beside it)."""
        return self.folder(recipe) / RUN_DIR

    def round_folder(self, recipe: Recipe, round: int | None) -> Path:
        out = self.out(recipe)
        return out if round is None else out.with_name(f"{RUN_DIR}-r{round}")

    def encoder_folder(self, recipe: Recipe) -> Path:
        """The folder of the encoder the recipe names (for DefSent+, its round's)."""
        return self.round_folder(recipe, recipe.encoder_round)

    def output_folders(self, recipe: Recipe) -> list[Path]:
        """Every output folder of the run: one, or one per DefSent+ round."""
        if recipe.rounds is None:
            return [self.out(recipe)]
        return [self.round_folder(recipe, r) for r in range(1, recipe.rounds + 1)]

    def finished(self, recipe: Recipe) -> bool:
        """Whether the whole run is trained (every round of a DefSent+ run)."""
        return all((f / MANIFEST).is_file() for f in self.output_folders(recipe))

    def write_recipe(self, recipe: Recipe) -> None:
        write_json(self.folder(recipe) / RECIPE_FILE, recipe.record())

    def clear_unresumable(self, recipe: Recipe) -> None:
        """Clear output folders that an interruption left with neither a finished run nor a
        checkpoint (killed before the first checkpoint): the loop would refuse them, and there is
        nothing in them to resume. Only what the run wrote is deleted (``manifests.clear_run``)."""
        for folder in self.output_folders(recipe):
            if not (folder / MANIFEST).exists() and not (folder / CHECKPOINT / CHECKPOINT_STATE).exists():
                clear_run(folder)

    @contextlib.contextmanager
    def lock(self, recipe: Recipe) -> Iterator[None]:
        """Hold the recipe's lock; a process that finds it taken says so and waits."""
        folder = self.folder(recipe)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / LOCK_FILE, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logger.info(
                    "waiting for another process that trains %s (%s) until it finishes, with no time "
                    "limit (its progress is in the run's metrics.jsonl); Ctrl-C stops only this wait, the "
                    "other process goes on",
                    recipe.display_name,
                    folder,
                )
                fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def check_name(self, name: str, folder: Path) -> None:
        """Refuse, before anything trains, a name that cannot register the run in ``folder``: one that
        is not a plain folder name, or one the runs folder already gives to something else."""
        if name in ("", ".", "..") or "/" in name or "\0" in name or name.startswith("."):
            raise InvalidInputError(f"--name {name!r}: give a plain name (no '/', not starting with '.')")
        here = folder.resolve()
        taken = self.root / name
        found = [p for p in (taken, registered_runs(self.root).get(name)) if p is not None and _occupied(p)]
        clash = next((p for p in found if p.resolve() != here), None)
        if clash is not None:
            raise InvalidInputError(
                f"--name {name}: the runs folder {self.root} already has {name!r} ({clash}); choose another --name"
            )

    def register(self, name: str, folder: Path) -> None:
        """Register the finished run in ``folder`` under ``name``: a link in the runs folder, unless
        the runs folder finds it by that name already (a run trained inside it)."""
        self.check_name(name, folder)
        found = registered_runs(self.root).get(name)
        if found is None or found.resolve() != folder.resolve():
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / name).symlink_to(folder.resolve(), target_is_directory=True)

    def find(self, key: str) -> Path | None:
        """The folder of a key, whatever its method."""
        hits = sorted(self.root.glob(f"*/{key}/{RECIPE_FILE}")) if self.root.is_dir() else []
        return hits[0].parent if hits else None

    def stored_record(self, key: str) -> dict[str, Any] | None:
        """The recipe record a run folder holds, by key; None when the store has no such key."""
        folder = self.find(key)
        if folder is None:
            return None
        path = folder / RECIPE_FILE
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        return record

    def runs(self) -> list[dict[str, Any]]:
        """Every recipe folder: its recorded recipe and whether its run is finished."""
        rows = []
        for path in sorted(self.root.glob(f"*/*/{RECIPE_FILE}")) if self.root.is_dir() else []:
            try:
                record = json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
            outputs = [p for p in path.parent.iterdir() if p.is_dir() and p.name.startswith(RUN_DIR)]
            rows.append(
                {
                    "key": record.get("key"),
                    "name": record.get("name"),
                    "method": record.get("method"),
                    "folder": path.parent,
                    "finished": bool(outputs) and all((p / MANIFEST).is_file() for p in outputs),
                }
            )
        return rows


def _occupied(path: Path) -> bool:
    """Whether something stands at ``path`` (a link counts, even one whose target is gone)."""
    return path.exists() or path.is_symlink()


def portable(value: Any, roots: dict[Path, str]) -> Any:
    """``value`` with every string under one of ``roots`` rewritten as ``<label>/<rest>``: a
    manifest stored with results must not carry this machine's absolute paths."""
    if isinstance(value, dict):
        return {k: portable(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, roots) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        for root, label in sorted(roots.items(), key=lambda item: -len(str(item[0]))):
            text = str(root)
            if value == text or value.startswith(text + "/"):
                return label + value[len(text) :]
    return value
