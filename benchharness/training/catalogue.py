"""Trained recipes as a ``catalogues`` plugin, and training on demand.

A recipe's name (``paser``, ``defsent-plus-r2``, ``recipe:<key>``) resolves to the encoder its run
saved in the run store (``runstore.py``). When the run is missing and training is allowed, the recipe
is trained first (``train.ensure_trained``: it says what it will train and about how long that takes,
shows its progress, resumes an interrupted training at the next request, and makes a second process
asking for the same recipe wait for the first); ``--no-train`` turns that into an error that prints
the one command that trains the recipe.

The training edge is here: the evaluation's settings become the training's (:func:`train_settings`:
its configuration, device, data root, progress), so a recipe's corpus and dev split are read from the
evaluation's data root, and nowhere else. What a recipe trains, its precision and batch sizes included,
is the recipe's own: it is in its key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.specs import Catalogue, EncoderSpec, Resolved
from benchharness.training.recipes import RECIPE_PREFIX, Recipe, RecipeBook, load_book, stored_recipe, with_round
from benchharness.training.runstore import NotTrainedError, RunStore, portable

if TYPE_CHECKING:
    from benchharness.evaluation.run_settings import RunSettings
    from benchharness.training.settings import TrainSettings

#: ``recipe:<key>`` and ``recipe:<key>-r<k>``
KEYED = re.compile(rf"{RECIPE_PREFIX}([0-9a-f]+)(?:-r(\d+))?")


def names_a_recipe(name: str) -> bool:
    """Whether ``name`` stands for a training recipe (a name of the recipe file, or
    ``recipe:<key>[-r<k>]``), without building it or looking in a run store."""
    if name.startswith(RECIPE_PREFIX):
        return KEYED.fullmatch(name) is not None
    return load_book().written(name) is not None


def recipe_for(name: str, book: RecipeBook, store: RunStore) -> Recipe | None:
    """The recipe an encoder name stands for: a name of the recipe file (``paser``,
    ``defsent-plus-r2``) or ``recipe:<key>[-r<k>]`` of a run in the store; None otherwise."""
    if not name.startswith(RECIPE_PREFIX):
        return book.lookup(name)
    m = KEYED.fullmatch(name)
    if m is None:
        return None
    recipe = stored_recipe(store, m.group(1), book)
    if recipe is None:
        raise NotTrainedError(
            f"no run in the run store {store.root} has key {m.group(1)}; "
            "a recipe derived from flags is known by key only once `benchharness train` has "
            "started it"
        )
    return with_round(recipe, int(m.group(2)), None) if m.group(2) else recipe


def train_settings(settings: RunSettings) -> TrainSettings:
    """The training settings of an evaluation run: its configuration, data root (the one its tasks
    read), device and progress switch, and the harness's dev evaluation."""
    from benchharness.training.dev_eval import for_training
    from benchharness.training.settings import TrainSettings

    return TrainSettings(
        config=settings.config,
        data_dir=settings.data_dir,
        verify_data=settings.verify_data,
        device=settings.device,
        progress=settings.show_progress,
        dev=for_training,
    )


def trained_encoder(
    name: str, *, settings: RunSettings, train: bool = True
) -> tuple[EncoderSpec, dict[str, Any]] | None:
    """The encoder spec and portable manifest of the recipe ``name`` names, trained first when missing,
    with the run's ``settings`` (configuration, device, data root, progress); None when ``name`` is no
    recipe."""
    from benchharness.core.manifests import manifest_spec, read_manifest

    store = RunStore(settings.config.runs_dir)
    book = load_book(config=settings.config)
    recipe = recipe_for(name, book, store)
    if recipe is None:
        return None
    from benchharness.training.train import ensure_trained  # torch: only when a recipe resolves

    folder = ensure_trained(train_settings(settings), recipe, train=train, book=book)
    manifest = read_manifest(folder)
    spec = manifest_spec(folder, manifest)
    # the run's path is this machine's: results name the model by its recipe key (the weights
    # hash still pins it)
    spec["model_name"] = f"{RECIPE_PREFIX}{recipe.key}" + (f"-r{recipe.encoder_round}" if recipe.rounds else "")
    roots = {
        store.folder(recipe): f"{RECIPE_PREFIX}{recipe.key}",
        store.root: "$BENCHHARNESS_RUNS",
        settings.data().root: "$BENCHHARNESS_DATA",
        Path.home(): "~",
    }
    return spec, portable(manifest, roots)


def _resolve(name: str, *, settings: RunSettings, train: bool = True) -> Resolved | None:
    """The recipe's encoder, trained first with the run's ``settings`` (device, data root) when missing."""
    found = trained_encoder(name, train=train, settings=settings)
    return None if found is None else Resolved(*found)


def _rows() -> list[dict[str, str]]:
    book = load_book()
    rows = []
    for name in book.names():
        entry = book.source(name)
        rows.append(
            {
                "name": name,
                "source": book.path.name,
                "settings": f"benchharness train {entry['method']}"
                + ("" if name == entry["method"] else f" --recipe {name}"),
                "description": f"recipe, trained on demand: {entry.get('description', '')}",
            }
        )
    return rows


CATALOGUE = Catalogue(resolve=_resolve, rows=_rows, on_demand=names_a_recipe, order=100)
