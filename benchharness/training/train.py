"""``benchharness.train``: train a recipe or a method from Python and get the trained encoder back.

It builds the recipe ``benchharness train`` builds from the same values (the recipe named, or the
one named after the method, changed by the options given), trains it through the method's
``train`` with the harness's STS-B dev evaluation, and returns a
:class:`~benchharness.training.trained.TrainedEncoder`. Without ``out`` nothing is written: no
folder, no run store, no cache. Like ``benchharness.evaluate``, it logs under ``benchharness``,
shows progress bars only when asked, and leaves the process as it found it: ``os.environ``, torch's
threads and the random generators it seeds.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchharness.core.errors import InvalidInputError
from benchharness.core.settings import Config
from benchharness.training.recipes import RecipeBook
from benchharness.training.runstore import RunStore
from benchharness.training.trained import TrainedEncoder


def train(
    recipe_or_method: str,
    *,
    sentences: Sequence[str] | str | os.PathLike[str] | None = None,
    base: str | None = None,
    max_steps: int | None = None,
    device: str | None = None,
    seed: int | None = None,
    data_dir: str | Path | None = None,
    out: str | Path | None = None,
    overwrite: bool = False,
    show_progress: bool = False,
    config: Config | str | Path | None = None,
    **options: Any,
) -> TrainedEncoder:
    """Train ``recipe_or_method`` and return the trained encoder.

    ``recipe_or_method``: a recipe (``"paser-top1"``) or a method (``"simcse"``: the recipe named
    after it; a plugin method without one needs ``base``). ``sentences``: a list of sentences, or
    a file of one sentence a line, in place of the recipe's corpus (for the methods that train on
    sentences; one that takes other data says what). ``base``: the model to start from (a hub id,
    a model folder, a run). ``max_steps``, ``seed`` and ``**options`` are the method's options
    (``benchharness train <method> -h`` lists them; a ``preset`` name too), checked against its
    declaration. ``device``: where to train. ``data_dir``: the data root the corpus and the dev
    split are read from (default: the configured one). ``out``: a folder to train into, as
    ``benchharness train --out`` does (resumable; ``overwrite`` retrains a finished one); without
    it nothing is written. ``config``: the configuration (a ``benchharness.toml`` path or a loaded
    ``Config``; default: the one found from the working directory, read once): the runs folder, the
    data root and the Hugging Face cache.

    DefSent+ trains in rounds: the encoder returned is the last round's, and ``.rounds`` holds
    every round's.
    """
    from benchharness.core.cpu_share import kept_threads
    from benchharness.core.data_root import DataRoot
    from benchharness.core.encoder import stable_hash
    from benchharness.core.environment import kept_environment
    from benchharness.core.progress import progress_shown
    from benchharness.core.seeding import kept_random_state
    from benchharness.core.settings import configuration
    from benchharness.training import recipes
    from benchharness.training.base_model import base_folder
    from benchharness.training.dev_eval import for_training
    from benchharness.training.method import TrainingContext
    from benchharness.training.train_data import IN_MEMORY

    _check_keywords(recipe_or_method, device, data_dir, out, overwrite, show_progress)
    device = None if device is None else str(device)
    cfg = configuration(config)
    book = recipes.load_book(config=cfg)
    method, start = _what(recipe_or_method, book)
    preset = options.pop("preset", None)
    given = dict(options)
    for key, value in (("max_steps", max_steps), ("seed", seed)):
        if value is not None:
            given[key] = value
    held: tuple[str, ...] | None = None
    digest = None
    if sentences is not None:
        if "data" in given:
            raise InvalidInputError("give either sentences= or data=, not both")
        if isinstance(sentences, (str, os.PathLike)):  # as `--data <file>` names it: the same recipe
            path = Path(sentences).expanduser()
            given["data"] = str(path) if path.suffix == ".txt" else f"text:{path}"
        else:
            held = _sentences(sentences)
            given["data"] = IN_MEMORY
            digest = stable_hash(list(held))
    try:
        recipe = recipes.derive(method, given, recipe=start, base=base, preset=preset, book=book, data_digest=digest)
        refusal = None if sentences is None or recipe.typed is None else recipe.typed.sentence_data()
    except InvalidInputError:  # a method that takes other data may refuse sentences as its data
        refusal = _sentence_refusal(method, start, base, preset, given, book) if sentences is not None else None
        if refusal is None:
            raise
        raise InvalidInputError(refusal) from None
    if refusal is not None:
        raise InvalidInputError(refusal)
    assert recipe.typed is not None  # every recipe is built with its typed options
    data = DataRoot(cfg.data_root(data_dir))
    store = RunStore(cfg.runs_dir)
    with kept_environment(), kept_threads(), kept_random_state(), progress_shown(show_progress):
        context = TrainingContext(
            base="",
            data=data,
            hub=cfg.hub(),
            device=device,
            overwrite=overwrite,
            dev=for_training,
            progress=show_progress,
            sentences=held,
        )
        if out is not None:
            from benchharness.training.on_demand import train_into

            runs = train_into(recipe, Path(out).expanduser(), context=context, store=store)
        else:
            runs = recipes.method_named(recipe.method).train(
                recipe.typed,
                replace(context, base=base_folder(_in_memory_base(recipe, store), cfg.runs_dir), name=recipe.run_name),
            )
            _record(recipe, runs)
    trained = [
        TrainedEncoder(f"trained:{recipe.run_name}" + (f"-r{i}" if recipe.rounds is not None else ""), run)
        for i, run in enumerate(runs, 1)
    ]
    for encoder in trained:
        encoder.rounds = trained
    return trained[(recipe.encoder_round or len(trained)) - 1]


def _check_keywords(name: Any, device: Any, data_dir: Any, out: Any, overwrite: Any, show_progress: Any) -> None:
    """The keywords every call takes, refused in one line before anything loads."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"{name!r}: give the name of a recipe or a method (`benchharness list encoders`)")
    if device is not None and not isinstance(device, str) and type(device).__name__ != "device":
        raise InvalidInputError(f"device={device!r}: give a device name such as 'cpu', 'cuda' or 'cuda:1'")
    for key, value in (("data_dir", data_dir), ("out", out)):
        if value is not None and (not isinstance(value, (str, os.PathLike)) or not str(value).strip()):
            raise InvalidInputError(f"{key}={value!r}: must be a folder (a str or a Path)")
    for key, value in (("overwrite", overwrite), ("show_progress", show_progress)):
        if not isinstance(value, bool):
            raise InvalidInputError(f"{key}={value!r}: must be True or False")


def _what(name: str, book: RecipeBook) -> tuple[str, str | None]:
    """The method a name trains and the recipe it starts from (None: the method's own)."""
    from benchharness.core.plugins import PLUGINS

    recipe = book.lookup(name)
    if recipe is not None:
        return recipe.method, name
    if PLUGINS.entry("methods", name) is not None:
        return name, None
    known = [*PLUGINS.names("methods"), *book.names()]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise InvalidInputError(
        f"{name!r} is neither a recipe of {book.path.name} nor a training method.{hint} "
        f"Methods: {', '.join(PLUGINS.names('methods'))}"
    )


def _sentence_refusal(
    method: str, start: str | None, base: str | None, preset: str | None, given: dict[str, Any], book: RecipeBook
) -> str | None:
    """Why the method, with the other options given, takes no sentences (None: it does, or the
    options are refused for another reason)."""
    from benchharness.training import recipes

    others = {k: v for k, v in given.items() if k != "data"}
    try:
        recipe = recipes.derive(method, others, recipe=start, base=base, preset=preset, book=book)
    except InvalidInputError:
        return None
    return None if recipe.typed is None else recipe.typed.sentence_data()


def _sentences(sentences: Sequence[str]) -> tuple[str, ...]:
    """The training sentences as a text file's lines are read: stripped, blank ones left out."""
    if isinstance(sentences, (bytes, bytearray)) or not isinstance(sentences, Sequence):
        raise InvalidInputError(
            f"sentences={type(sentences).__name__}: give a list of strings or a file of one sentence a line"
        )
    bad = next((i for i, s in enumerate(sentences) if not isinstance(s, str)), None)
    if bad is not None:
        raise InvalidInputError(f"sentences[{bad}] is a {type(sentences[bad]).__name__}, not a string")
    kept = tuple(s.strip() for s in sentences if s.strip())
    if not kept:
        raise InvalidInputError("sentences= holds no sentence")
    return kept


def _in_memory_base(recipe: Any, store: RunStore) -> str:
    """The model a recipe starts from; a base that is another recipe's run must be in the run store
    already (training in memory writes nothing, so it trains no base there)."""
    if recipe.base_recipe is None:
        return str(recipe.base)
    from benchharness.training.recipes import command

    if not store.finished(recipe.base_recipe):
        raise InvalidInputError(
            f"{recipe.display_name} continues the run of {recipe.base_recipe.display_name}, which is not trained: "
            f"train it first ({command(recipe.base_recipe)}), or pass out= to train both, or base= a model"
        )
    return str(store.encoder_folder(recipe.base_recipe))


def _record(recipe: Any, runs: list[Any]) -> None:
    """Each trained run's manifest records its recipe, as a run folder's does."""
    from benchharness.training.recipes import round_recipe

    for r, run in enumerate(runs, 1):
        if run.manifest is not None:
            run.manifest["recipe"] = round_recipe(recipe, r).record()
