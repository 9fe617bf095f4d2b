"""Training shaped like evaluation: one settings value, a plan built once, and :func:`train_with`.

Each edge builds a :class:`~benchharness.training.settings.TrainSettings` once (how and where:
configuration, data root, device, threads, progress, overwrite, checkpointing, dev evaluation) and a
:class:`~benchharness.training.plan.Plan` (what and into where: recipe, base, output folder, name),
and hands both to :func:`train_with`, the twin of ``evaluate_with``: ``benchharness train``
(``cli/train.py``), :func:`train` here, and on-demand training (``catalogue.py``, with the settings of
the evaluation that asks; :func:`ensure_trained` keeps its run in the run store).

:func:`train` is ``benchharness.train``: it builds the recipe ``benchharness train`` builds from the
same values (the recipe named, or the one named after the method, changed by the options given) and
returns a :class:`~benchharness.training.trained.TrainedEncoder`. Without ``out`` nothing is written:
no folder, no run store, no cache. Like ``benchharness.evaluate``, it logs under ``benchharness``,
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
from benchharness.training import data_parallel
from benchharness.training.method import TrainedRun
from benchharness.training.plan import Plan
from benchharness.training.recipes import Recipe, RecipeBook, cached_revision, command, method_named
from benchharness.training.runstore import NotTrainedError, RunStore
from benchharness.training.settings import TrainSettings
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
    name: str | None = None,
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
    it nothing is written. ``name``: the name the encoder has in results and tables (default:
    ``trained:`` and its recipe's name). ``config``: the configuration (a ``benchharness.toml`` path
    or a loaded ``Config``; default: the one found from the working directory, read once): the runs
    folder, the data root, the Hugging Face cache, and the dev evaluation's configuration.

    DefSent+ trains in rounds: the encoder returned is the last round's, and ``.rounds`` holds
    every round's (named ``<name>-r<k>``).
    """
    from benchharness.core.cpu_share import kept_threads
    from benchharness.core.environment import kept_environment
    from benchharness.core.progress import progress_shown
    from benchharness.core.seeding import kept_random_state
    from benchharness.core.settings import configuration
    from benchharness.training.dev_eval import for_training

    _check_keywords(recipe_or_method, device, data_dir, out, name, overwrite, show_progress)
    settings = TrainSettings(
        config=configuration(config),
        data_dir=None if data_dir is None else Path(data_dir),
        device=None if device is None else str(device),
        overwrite=overwrite,
        progress=show_progress,
        dev=for_training,
    )
    given = dict(options)
    for key, value in (("max_steps", max_steps), ("seed", seed)):
        if value is not None:
            given[key] = value
    recipe, held = _recipe(settings, recipe_or_method, base, given, sentences)
    plan = Plan.of(recipe, out=None if out is None else Path(out).expanduser(), name=name, sentences=held)
    with kept_environment(), kept_threads(), kept_random_state(), progress_shown(show_progress):
        runs = train_with(settings, plan)
    rounds = recipe.rounds is not None
    label = name or f"trained:{recipe.run_name}"
    trained = [TrainedEncoder(label + (f"-r{i}" if rounds else ""), run) for i, run in enumerate(runs, 1)]
    for encoder in trained:
        encoder.rounds = trained
    return trained[(recipe.encoder_round or len(trained)) - 1]


def _check_keywords(
    recipe: Any, device: Any, data_dir: Any, out: Any, name: Any, overwrite: Any, show_progress: Any
) -> None:
    """The keywords every call takes, refused in one line before anything loads."""
    if not isinstance(recipe, str) or not recipe.strip():
        raise InvalidInputError(f"{recipe!r}: give the name of a recipe or a method (`benchharness list encoders`)")
    if device is not None and not isinstance(device, str) and type(device).__name__ != "device":
        raise InvalidInputError(f"device={device!r}: give a device name such as 'cpu', 'cuda' or 'cuda:1'")
    for key, value in (("data_dir", data_dir), ("out", out)):
        if value is not None and (not isinstance(value, (str, os.PathLike)) or not str(value).strip()):
            raise InvalidInputError(f"{key}={value!r}: must be a folder (a str or a Path)")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidInputError(f"name={name!r}: must be a non-empty string")
    for key, value in (("overwrite", overwrite), ("show_progress", show_progress)):
        if not isinstance(value, bool):
            raise InvalidInputError(f"{key}={value!r}: must be True or False")


def _recipe(
    settings: TrainSettings,
    name: str,
    base: str | None,
    given: dict[str, Any],
    sentences: Sequence[str] | str | os.PathLike[str] | None,
) -> tuple[Recipe, tuple[str, ...] | None]:
    """The recipe a call asks for, built once, and the sentences it holds in memory (None: its data
    is a corpus or a file the recipe names)."""
    from benchharness.core.encoder import stable_hash
    from benchharness.training import recipes
    from benchharness.training.train_data import IN_MEMORY

    book = recipes.load_book(config=settings.config)
    method, start = _what(name, book)
    preset = given.pop("preset", None)
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
    except InvalidInputError:  # a method that takes other data may refuse sentences as its data
        if sentences is None:
            raise
        others = {k: v for k, v in given.items() if k != "data"}
        try:
            typed = recipes.derive(method, others, recipe=start, base=base, preset=preset, book=book).typed
        except InvalidInputError:
            typed = None
        refusal = None if typed is None else typed.sentence_data()
        if refusal is None:
            raise
        raise InvalidInputError(refusal) from None
    refusal = None if sentences is None or recipe.typed is None else recipe.typed.sentence_data()
    if refusal is not None:
        raise InvalidInputError(refusal)
    return recipe, held


def _what(name: str, book: RecipeBook) -> tuple[str, str | None]:
    """The method a name trains and the recipe it starts from (None: the method's own), without
    building the recipe."""
    from benchharness.core.plugins import PLUGINS

    written = book.written(name)
    if written is not None:
        return str(book.source(written[0])["method"]), name
    if PLUGINS.entry("methods", name) is not None:
        return name, None
    known = [*PLUGINS.names("methods"), *book.names()]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise InvalidInputError(
        f"{name!r} is neither a recipe of {book.path.name} nor a training method.{hint} "
        f"Methods: {', '.join(PLUGINS.names('methods'))}"
    )


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


def train_with(settings: TrainSettings, plan: Plan, book: RecipeBook | None = None) -> list[TrainedRun]:
    """Train the plan's recipe as the settings say, into the plan's output folder (resumable; every
    manifest records the recipe) or in memory, and return its runs (one, or one per DefSent+ round).

    The output folders are checked before anything else; the examples are read once, and their count
    gives the time estimate announced for a folder (from ``book``'s measurements). A base that is
    another recipe's run is trained first into the run store when the plan has a folder (in memory,
    nothing is written: it must be trained already). A name the plan registers is registered in the
    runs folder once its run is finished."""
    from benchharness.training.estimate import announce
    from benchharness.training.harness import Trainer
    from benchharness.training.resume import check_out

    recipe = plan.recipe
    assert recipe is not None and recipe.typed is not None  # a plan to train has a recipe, built typed
    main = data_parallel.is_main()
    store = RunStore(settings.runs_dir)
    if main:  # refused before any model loads, the base recipe's included
        for folder in plan.folders():
            check_out(folder, settings.overwrite)
        if plan.register and plan.name is not None and plan.out is not None:
            store.check_name(plan.name, plan.out)
    trainer = Trainer(method_named(recipe.method), recipe.typed, settings, plan)
    examples = trainer.examples()
    if main and plan.out is not None:
        announce(recipe, settings, plan, len(examples.items), book)
    if recipe.base_recipe is not None:
        trainer = replace(trainer, plan=replace(plan, base=_trained_base(settings, plan, store)))
    _check_revision(recipe, settings)
    runs = trainer.run(examples)
    if main and plan.register and plan.name is not None:
        for run in runs:
            if run.completed and run.out is not None and run.manifest is not None:
                store.register(run.manifest["name"], run.out)
    return runs


def _trained_base(settings: TrainSettings, plan: Plan, store: RunStore) -> str:
    """The model folder of the run the plan's recipe continues: trained now (to its end, under its
    own name) when the plan writes a folder, else one the run store holds already."""
    from benchharness.training.base_model import base_folder

    assert plan.recipe is not None and plan.recipe.base_recipe is not None
    base = plan.recipe.base_recipe
    if plan.out is not None:
        folder = ensure_trained(settings, base)
    elif store.finished(base):
        folder = store.encoder_folder(base)
    else:
        raise InvalidInputError(
            f"{plan.recipe.display_name} continues the run of {base.display_name}, which is not trained: "
            f"train it first ({command(base)}), or pass out= to train both, or base= a model"
        )
    return base_folder(str(folder), store.root)


def _check_revision(recipe: Recipe, settings: TrainSettings) -> None:
    if recipe.base_recipe is None and recipe.base_revision is not None:
        cached = cached_revision(recipe.base, settings.hub.cache)
        if cached is not None and cached != recipe.base_revision:
            raise InvalidInputError(
                f"recipe {recipe.display_name} pins {recipe.base} at revision "
                f"{recipe.base_revision}, "
                f"but the Hugging Face cache holds {cached}: fetch the pinned one "
                f"(huggingface-cli download {recipe.base} --revision {recipe.base_revision}) "
                "or derive a recipe with --base"
            )


def describe(settings: TrainSettings, plan: Plan) -> str:
    """The plan's training data summarised by its method (``--stats-only``), counted with the base's
    tokenizer."""
    from transformers import AutoTokenizer

    from benchharness.encoders import hub
    from benchharness.training.harness import load_examples

    recipe = plan.recipe
    assert recipe is not None and recipe.typed is not None
    method = method_named(recipe.method)
    assert method.describe_data is not None  # --stats-only exists only then
    examples = load_examples(method, recipe.typed, settings.data(), None)
    tokenizer = AutoTokenizer.from_pretrained(str(hub.resolve(plan.base, settings.hub).path))
    return method.describe_data(recipe.typed, examples, tokenizer)


def train_in_store(settings: TrainSettings, recipe: Recipe, book: RecipeBook | None = None) -> Path:
    """Train ``recipe`` into its run-store folder unless it is there (``settings.overwrite`` retrains):
    hold the recipe's lock, announce it with the time estimate, resume an interrupted run."""
    store = RunStore(settings.runs_dir)
    plan = Plan.of(recipe, out=store.out(recipe))
    if not data_parallel.is_main():
        # a rank > 0 of a data-parallel run: rank 0 holds the lock and keeps the store's records, and
        # this rank trains beside it (the loop waits for rank 0 to have prepared the output folder)
        train_with(settings, plan)
        return store.encoder_folder(recipe)
    with store.lock(recipe):
        if store.finished(recipe) and not settings.overwrite:
            return store.encoder_folder(recipe)
        store.clear_unresumable(recipe)
        store.write_recipe(recipe)
        train_with(settings, plan, book)
    return store.encoder_folder(recipe)


def ensure_trained(
    settings: TrainSettings, recipe: Recipe, *, train: bool = True, book: RecipeBook | None = None
) -> Path:
    """The encoder folder of ``recipe`` in the settings' run store, trained now if missing and
    ``train`` allows it: to its end (never paused, never retrained: a run asked for as an encoder, or
    as the base of another, must finish once)."""
    from benchharness.training.estimate import estimate

    store = RunStore(settings.runs_dir)
    if store.finished(recipe):
        return store.encoder_folder(recipe)
    if not train:
        where = store.folder(recipe)
        raise NotTrainedError(
            f"encoder {recipe.display_name!r} is the training recipe {recipe.key} ({recipe.summary()}) and has no "
            f"finished run in {where}; --no-train forbids training it now. Train it with:\n"
            f"    {command(recipe)}\n({estimate(recipe, book, data=settings.data())}), or run again without "
            "--no-train to train it first."
        )
    nproc = recipe.options.get("nproc", 1)
    if nproc > 1 and data_parallel.launched_world_size() != nproc:
        raise NotTrainedError(
            f"encoder {recipe.display_name!r} is the data-parallel recipe {recipe.key} "
            f"({nproc} processes), which only `benchharness train` launches: {command(recipe)}"
        )
    folder = train_in_store(replace(settings, overwrite=False, stop_after=None), recipe, book)
    if not store.finished(recipe):
        raise NotTrainedError(f"training {recipe.display_name} stopped before the end; run again to resume it")
    return folder
