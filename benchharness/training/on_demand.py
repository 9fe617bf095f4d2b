"""Training on demand: a recipe's name used as an encoder is trained the first time it is asked for.

``benchharness run --encoders paser`` finds the recipe ``paser`` (``benchharness.training.recipes``) and its
run in the run store (``benchharness.training.runstore``); when the run is missing it says what it will
train and about how long that takes (steps x the seconds per step measured for that method and base
on this kind of machine, the ``[[throughput]]`` table of the recipe file), trains it through the
method's ``train`` with its progress bar, and goes on to evaluate it. An interrupted training
resumes from its checkpoint at the next run; a second process asking for the same recipe waits
for the first. ``--no-train`` turns all this into an error that prints the one command that
trains the recipe.

The run's settings reach the training: its device, its data root (the recipe's corpus and the dev
split are read there, and nowhere else) and the Hugging Face settings (``context_for``). What a
recipe trains, its precision and batch sizes included, is the recipe's own: it is in its key.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.core.data_root import DataRoot, default_data
from benchharness.core.errors import InvalidInputError
from benchharness.core.manifests import CHECKPOINT, MANIFEST
from benchharness.core.specs import EncoderSpec
from benchharness.training.recipes import (
    RECIPE_PREFIX,
    Recipe,
    RecipeBook,
    Throughput,
    cached_revision,
    command,
    load_book,
    method_named,
    round_recipe,
    stored_recipe,
    with_round,
)
from benchharness.training.runstore import RunStore, portable

if TYPE_CHECKING:
    from benchharness.evaluation.run_settings import RunSettings
    from benchharness.training.method import TrainedRun, TrainingContext

logger = logging.getLogger(__name__)


class NotTrainedError(InvalidInputError):
    """A recipe asked for without its run, where training it now is not allowed."""


@dataclass(frozen=True)
class Estimate:
    steps: int | None
    seconds: float | None
    basis: str  # where the seconds per step come from, or why there is no estimate

    def __str__(self) -> str:
        if self.steps is None:
            return f"steps unknown ({self.basis})"
        if self.seconds is None:
            return f"{self.steps:,} steps, time unknown ({self.basis})"
        return f"{self.steps:,} steps, about {duration(self.seconds)} ({self.basis})"


#: a year: an estimate beyond it is no run anyone plans but a mistyped --max-steps or --epochs
ABSURD_SECONDS = 365 * 24 * 3600


def duration(seconds: float) -> str:
    if seconds >= ABSURD_SECONDS:
        return f"{seconds / ABSURD_SECONDS:,.0f} years"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 600:  # a short run: to the ten seconds, which is how far the estimate is trusted
        minutes, rest = divmod(int(round(seconds, -1)), 60)
        return f"{minutes} min {rest:02d} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def names_a_recipe(name: str) -> bool:
    """Whether ``name`` stands for a training recipe (a name of the recipe file, or
    ``recipe:<key>[-r<k>]``), without building it or looking in a run store."""
    if name.startswith(RECIPE_PREFIX):
        return re.fullmatch(rf"{RECIPE_PREFIX}([0-9a-f]+)(?:-r(\d+))?", name) is not None
    return load_book().lookup(name) is not None


def recipe_for(name: str, book: RecipeBook, store: RunStore) -> Recipe | None:
    """The recipe an encoder name stands for: a name of the recipe file (``paser``,
    ``defsent-plus-r2``) or ``recipe:<key>[-r<k>]`` of a run in the store; None otherwise."""
    if not name.startswith(RECIPE_PREFIX):
        return book.lookup(name)
    m = re.fullmatch(rf"{RECIPE_PREFIX}([0-9a-f]+)(?:-r(\d+))?", name)
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


# ----------------------------------------------------------------------------------------------
# how long


def _root_base(recipe: Recipe) -> str:
    while recipe.base_recipe is not None:
        recipe = recipe.base_recipe
    return recipe.base


def count_examples(recipe: Recipe, data: DataRoot | None = None) -> int | None:
    """Training examples the run will see per epoch (per round for DefSent+), from the data root
    ``data`` (default: the environment's, ``default_data``); None if the data is not there."""
    from benchharness.core.data_root import DataError

    o = recipe.options
    assert recipe.typed is not None  # every recipe is built with its typed options
    data = data or default_data()
    try:
        n = _counted(recipe.method, recipe.typed, str(data.root), data.verify)
    except (DataError, FileNotFoundError, LookupError):
        return None
    return min(n, o["limit"]) if o.get("limit") and recipe.rounds is None else n


#: counts made in this process, by (method, options, data root, verify): counting reads a whole
#: corpus (all of SNLI and MNLI, the dictionaries), and an estimate asks for the same count again to
#: plan the steps and the dev evaluations; the data root's files do not change under a process
_COUNTS: dict[tuple[Any, ...], int] = {}


def _counted(method: str, typed: Any, root: str, verify: bool) -> int:
    from benchharness.core.data_root import DataRoot

    key = (method, typed, root, verify)
    try:
        known = _COUNTS.get(key)
    except TypeError:  # options holding a list: not a key, counted each time
        return method_named(method).count_examples(typed, DataRoot(root, verify))
    if known is None:
        known = _COUNTS[key] = method_named(method).count_examples(typed, DataRoot(root, verify))
    return known


def planned_steps(recipe: Recipe, data: DataRoot | None = None) -> int | None:
    """Optimizer steps of the whole run, as the loop counts them (``loop.total_steps``)."""
    o = recipe.options
    if o.get("max_steps"):
        return int(o["max_steps"]) * (recipe.rounds or 1)
    n = count_examples(recipe, data)
    if n is None:
        return None
    per_epoch = n // o["batch_size"] if o.get("drop_last", True) else math.ceil(n / o["batch_size"])
    return per_epoch * o.get("epochs", 1) * (recipe.rounds or 1)


def device_kind(device: str | None) -> str:
    if device:
        return "cuda" if device.startswith("cuda") else "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_kind(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The kind of CPU a throughput row was measured on: native bf16 (AVX512-BF16 or AMX) runs
    these models' steps about a quarter faster than AVX2 alone, so rows are kept per kind."""
    from benchharness.core.devices import has_native_bf16

    if has_native_bf16(cpuinfo):
        return "avx512-bf16"
    try:
        return "avx2" if " avx2" in cpuinfo.read_text() else "other"
    except OSError:
        return "other"


def planned_evaluations(recipe: Recipe, data: DataRoot | None = None) -> int | None:
    """Dev evaluations of the whole run, as the loop makes them: step 0 when ``eval_at_start``, every
    ``eval_every`` steps and at the last step, or once at the end when the run evaluates without a
    period (DefSent+ ``--dev``); per round for DefSent+. An upper bound when ``patience`` may stop
    the run early. Only a periodic evaluation needs the step count (which may read the whole corpus)."""
    o = recipe.options
    rounds = recipe.rounds or 1
    at_start = int(bool(o.get("eval_at_start")))
    every = o.get("eval_every")
    if not every:
        return rounds * (at_start + int(bool(at_start or o.get("dev"))))
    steps = planned_steps(recipe, data)
    if steps is None:
        return None
    return rounds * (at_start + math.ceil(steps // rounds / every))


def measured(recipe: Recipe, book: RecipeBook, device: str) -> tuple[float, Throughput, bool] | None:
    """Seconds per step for this recipe on this kind of machine: a measurement of the same method,
    base, batch size and length, else one of the same method and base scaled by batch x length
    (the third value says it was scaled); None without one. On CPU, rows of this CPU kind come
    first."""
    base = _root_base(recipe)
    same = [t for t in book.throughput if t.method == recipe.method and t.base == base and t.device == device]
    if not same:
        return None
    if device == "cpu":
        kind = cpu_kind()
        same.sort(key=lambda t: t.cpu != kind)  # stable: this kind's rows first, the file's order kept
    bs, length = recipe.options["batch_size"], recipe.options["max_length"]
    for t in same:
        if t.batch_size == bs and t.max_length == length:
            return t.seconds_per_step, t, False
    t = same[0]
    return t.seconds_per_step * (bs * length) / (t.batch_size * t.max_length), t, True


def evaluation_seconds(row: Throughput, book: RecipeBook) -> tuple[float, str] | None:
    """Seconds of one dev evaluation on the machine of ``row``, and a note on where they come from:
    the row's own measurement, else one of the same method, base and device scaled by the two rows'
    step times (an evaluation is forward passes of the same model, so it speeds up with the step)."""
    if row.seconds_per_evaluation is not None:
        return row.seconds_per_evaluation, ""
    for other in book.throughput:
        if other.seconds_per_evaluation is not None and (other.method, other.base, other.device) == (
            row.method,
            row.base,
            row.device,
        ):
            scale = (row.seconds_per_step / (row.batch_size * row.max_length)) / (
                other.seconds_per_step / (other.batch_size * other.max_length)
            )
            return other.seconds_per_evaluation * scale, f" (scaled from the {other.cpu or other.machine} row)"
    return None


def estimate(
    recipe: Recipe, book: RecipeBook | None = None, device: str | None = None, data: DataRoot | None = None
) -> Estimate:
    book = book or load_book()
    steps = planned_steps(recipe, data)
    if steps is None:
        return Estimate(None, None, f"the training data {recipe.options.get('data')!r} is not here")
    kind = device_kind(device)
    found = measured(recipe, book, kind)
    if found is None:
        return Estimate(
            steps,
            None,
            f"no throughput of {recipe.method} on {_root_base(recipe)} on {kind} in {book.path.name} [[throughput]]",
        )
    per_step, t, scaled = found
    seconds = steps * per_step
    basis = f"{per_step:.1f} s/step measured on {t.machine}, {t.date}" + (
        f"; scaled from batch {t.batch_size} x {t.max_length} tokens" if scaled else ""
    )
    evaluations = planned_evaluations(recipe, data) or 0
    per_evaluation = evaluation_seconds(t, book)
    if evaluations and per_evaluation is not None:
        seconds += evaluations * per_evaluation[0]
        basis += f"; {evaluations} dev evaluations of {per_evaluation[0]:.1f} s{per_evaluation[1]}"
    elif evaluations:
        basis += f"; plus {evaluations} dev evaluations, not timed for {recipe.method}"
    if t.seconds_setup is not None:  # once: DefSent+ reads its dictionary once for all its rounds
        seconds += t.seconds_setup
        basis += f"; {t.seconds_setup:.0f} s of data, model and saving"
    if recipe.rounds is not None:
        basis += "; plus the entry-embedding pass of each later round"
    return Estimate(steps, seconds, basis)


def announce(recipe: Recipe, out: Path, context: TrainingContext, book: RecipeBook | None = None) -> None:
    """Say what is about to train into ``out`` and about how long it takes (:func:`estimate`), and
    warn when that is beyond a year (:data:`ABSURD_SECONDS`): a number mistyped, which the run would
    otherwise take up in silence."""
    resuming = not context.overwrite and any((f / CHECKPOINT).exists() for f in output_folders(recipe, out))
    found = estimate(recipe, book, context.device, context.data)
    logger.info(
        "%s %s (%s; key %s) in %s: %s",
        "resuming" if resuming else "training",
        recipe.display_name,
        recipe.summary(),
        recipe.key,
        out,
        found,
    )
    if found.seconds is not None and found.seconds > ABSURD_SECONDS:
        logger.warning(
            "%s would train for about %s (%s steps); check --max-steps and --epochs, or stop it with Ctrl-C",
            recipe.display_name,
            duration(found.seconds),
            f"{found.steps:,}",
        )


# ----------------------------------------------------------------------------------------------
# training


def output_folders(recipe: Recipe, out: Path) -> list[Path]:
    """The folders the training command writes for ``--out out`` (DefSent+: one per round)."""
    if recipe.rounds is None:
        return [out]
    return [out.with_name(f"{out.name}-r{r}") for r in range(1, recipe.rounds + 1)]


def _check_revision(recipe: Recipe, hub_cache: Path) -> None:
    if recipe.base_recipe is None and recipe.base_revision is not None:
        cached = cached_revision(recipe.base, hub_cache)
        if cached is not None and cached != recipe.base_revision:
            raise InvalidInputError(
                f"recipe {recipe.display_name} pins {recipe.base} at revision "
                f"{recipe.base_revision}, "
                f"but the Hugging Face cache holds {cached}: fetch the pinned one "
                f"(huggingface-cli download {recipe.base} --revision {recipe.base_revision}) "
                "or derive a recipe with --base"
            )


def context_for(settings: RunSettings, data: DataRoot) -> TrainingContext:
    """The training context of an evaluation run: its device, its data root (the one its tasks read),
    the Hugging Face settings, its progress switch, and the harness's dev evaluation."""
    from benchharness.training.dev_eval import for_training
    from benchharness.training.method import TrainingContext

    return TrainingContext(
        base="",
        data=data,
        hub=settings.hub,
        device=settings.device,
        dev=for_training,
        progress=settings.show_progress,
    )


def train_into(
    recipe: Recipe, out: Path, *, context: TrainingContext, store: RunStore, book: RecipeBook | None = None
) -> list[TrainedRun]:
    """Train ``recipe`` into the output folder ``out`` with its method's ``train``, then record the
    recipe in every manifest it wrote (rank 0's job in a data-parallel run). A base that is another
    recipe is trained first when missing, into ``store``. ``context`` says how and where (its base,
    output folder and name are the recipe's to set; its ``name`` stands, when given, for the
    recipe's run name). The folders are checked and the run announced with its time estimate
    (from ``book``'s measurements) before any model loads; sentences held in memory have no
    corpus to count for it."""
    from benchharness.training import data_parallel
    from benchharness.training.base_model import base_folder
    from benchharness.training.manifest import update_manifest
    from benchharness.training.resume import check_out

    if data_parallel.is_main():  # refused before any model loads, the base recipe's included
        for folder in output_folders(recipe, out):
            check_out(folder, context.overwrite)
        if context.sentences is None:
            announce(recipe, out, context, book)
    base = recipe.base
    if recipe.base_recipe is not None:
        base = str(ensure_trained(recipe.base_recipe, train=True, context=context, store=store))
    _check_revision(recipe, context.hub.cache)
    assert recipe.typed is not None
    run_context = replace(context, base=base_folder(base, store.root), out=out, name=context.name or recipe.run_name)
    runs = method_named(recipe.method).train(recipe.typed, run_context)
    if not data_parallel.is_main():
        return runs
    for r, folder in enumerate(output_folders(recipe, out), 1):
        if (folder / MANIFEST).is_file():
            update_manifest(folder, recipe=round_recipe(recipe, r).record())
    return runs


def train_in_store(
    recipe: Recipe,
    *,
    context: TrainingContext,
    store: RunStore,
    book: RecipeBook | None = None,
) -> Path:
    """Train ``recipe`` into its run-store folder unless it is there (``context.overwrite`` retrains):
    hold the recipe's lock, announce it with the time estimate, resume an interrupted run."""
    from benchharness.training import data_parallel

    if not data_parallel.is_main():
        # a rank > 0 of a data-parallel run: rank 0 holds the lock and keeps the store's records, and
        # this rank trains beside it (the loop waits for rank 0 to have prepared the output folder)
        train_into(recipe, store.out(recipe), context=context, store=store)
        return store.encoder_folder(recipe)
    with store.lock(recipe):
        if store.finished(recipe) and not context.overwrite:
            return store.encoder_folder(recipe)
        store.clear_unresumable(recipe)
        store.write_recipe(recipe)
        train_into(recipe, store.out(recipe), context=context, store=store, book=book)
    return store.encoder_folder(recipe)


def ensure_trained(
    recipe: Recipe,
    *,
    train: bool = True,
    context: TrainingContext,
    store: RunStore,
    book: RecipeBook | None = None,
) -> Path:
    """The encoder folder of ``recipe`` in ``store``, trained now in ``context`` if missing and
    ``train`` allows it."""
    if store.finished(recipe):
        return store.encoder_folder(recipe)
    if not train:
        where = store.folder(recipe)
        raise NotTrainedError(
            f"encoder {recipe.display_name!r} is the training recipe {recipe.key} ({recipe.summary()}) and has no "
            f"finished run in {where}; --no-train forbids training it now. Train it with:\n"
            f"    {command(recipe)}\n({estimate(recipe, book, data=context.data)}), or run again without "
            "--no-train to train it first."
        )
    nproc = recipe.options.get("nproc", 1)
    if nproc > 1:
        from benchharness.training.data_parallel import launched_world_size

        if launched_world_size() != nproc:
            raise NotTrainedError(
                f"encoder {recipe.display_name!r} is the data-parallel recipe {recipe.key} "
                f"({nproc} processes), which only `benchharness train` launches: {command(recipe)}"
            )
    # a base recipe trained on the way is trained to the end, under its own name
    context = replace(context, overwrite=False, name=None, stop_after=None)
    folder = train_in_store(recipe, context=context, store=store, book=book)
    if not store.finished(recipe):
        raise NotTrainedError(f"training {recipe.display_name} stopped before the end; run again to resume it")
    return folder


def trained_encoder(
    name: str, *, settings: RunSettings, train: bool = True, store: RunStore | None = None
) -> tuple[EncoderSpec, dict[str, Any]] | None:
    """For the recipe catalogue: the encoder spec and portable manifest of the recipe ``name`` names,
    trained first when missing, with the run's ``settings`` (configuration, device, data root,
    progress; ``store`` default: the configured runs folder); None when ``name`` is no recipe."""
    store = store or RunStore(settings.config.runs_dir)
    book = load_book(config=settings.config)
    recipe = recipe_for(name, book, store)
    if recipe is None:
        return None
    data = settings.data()
    folder = ensure_trained(recipe, train=train, context=context_for(settings, data), store=store, book=book)
    from benchharness.core.manifests import manifest_spec, read_manifest

    manifest = read_manifest(folder)
    spec = manifest_spec(folder, manifest)
    # the run's path is this machine's: results name the model by its recipe key (the weights
    # hash still pins it)
    spec["model_name"] = f"{RECIPE_PREFIX}{recipe.key}" + (f"-r{recipe.encoder_round}" if recipe.rounds else "")
    roots = {
        store.folder(recipe): f"{RECIPE_PREFIX}{recipe.key}",
        store.root: "$BENCHHARNESS_RUNS",
        data.root: "$BENCHHARNESS_DATA",
        Path.home(): "~",
    }
    return spec, portable(manifest, roots)
