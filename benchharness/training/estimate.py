"""How long a recipe's training takes, said before it starts.

The estimate is the steps times the seconds per step measured for that method and base on this kind
of machine (the ``[[throughput]]`` table of the recipe file, ``benchmarks/train_throughput.py``), plus
the dev evaluations the loop will make and the measured setup. The steps come from the examples:
the count of those the run has read (``train.train_with`` announces with it), or, for a recipe not
training now (``--no-train``'s message), of those its method reads from the data root.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchharness.core.data_root import DataRoot, default_data
from benchharness.core.manifests import CHECKPOINT, CHECKPOINT_STATE
from benchharness.training.recipes import Recipe, RecipeBook, Throughput, load_book, method_named

if TYPE_CHECKING:
    from benchharness.training.plan import Plan
    from benchharness.training.settings import TrainSettings

logger = logging.getLogger(__name__)


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


# ----------------------------------------------------------------------------------------------
# how long


def _root_base(recipe: Recipe) -> str:
    while recipe.base_recipe is not None:
        recipe = recipe.base_recipe
    return recipe.base


def count_examples(recipe: Recipe, data: DataRoot | None = None) -> int | None:
    """Training examples the run will see per epoch (per round for DefSent+): those its method reads
    from the data root ``data`` (default: the environment's, ``default_data``), cut to its limit;
    None if the data is not there."""
    from benchharness.core.data_root import DataError
    from benchharness.training.harness import load_examples

    assert recipe.typed is not None  # every recipe is built with its typed options
    try:
        return len(load_examples(method_named(recipe.method), recipe.typed, data or default_data(), None).items)
    except (DataError, FileNotFoundError, LookupError):
        return None


def planned_steps(recipe: Recipe, data: DataRoot | None = None, examples: int | None = None) -> int | None:
    """Optimizer steps of the whole run, as the loop counts them (``loop.total_steps``), from the
    count of its ``examples`` (default: counted from the data root ``data``, only where the run has
    no ``max_steps``: counting reads a whole corpus)."""
    o = recipe.options
    if o.get("max_steps"):
        return int(o["max_steps"]) * (recipe.rounds or 1)
    n = examples if examples is not None else count_examples(recipe, data)
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


def planned_evaluations(recipe: Recipe, data: DataRoot | None = None, steps: int | None = None) -> int | None:
    """Dev evaluations of the whole run, as the loop makes them: step 0 when the options score the
    base first (``dev_at_start``), every ``eval_every`` steps and at the last step, or once at the end
    when the run evaluates without a period (DefSent+ ``--dev``); per round for DefSent+. An upper
    bound when ``patience`` may stop the run early. Only a periodic evaluation needs the run's
    ``steps`` (default: :func:`planned_steps` from the data root ``data``)."""
    typed = recipe.typed
    assert typed is not None  # every recipe is built with its typed options
    rounds = recipe.rounds or 1
    at_start = int(typed.dev_at_start)
    if typed.eval_every is None:
        return rounds * 2 * at_start  # before and after, or not at all
    steps = steps if steps is not None else planned_steps(recipe, data)
    if steps is None:
        return None
    return rounds * (at_start + math.ceil(steps // rounds / typed.eval_every))


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
    recipe: Recipe,
    book: RecipeBook | None = None,
    device: str | None = None,
    data: DataRoot | None = None,
    examples: int | None = None,
) -> Estimate:
    """How long training ``recipe`` takes on ``device``, from the count of its ``examples`` (default:
    counted from the data root ``data``) and ``book``'s measurements."""
    book = book or load_book()
    steps = planned_steps(recipe, data, examples)
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
    evaluations = planned_evaluations(recipe, steps=steps) or 0
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


def announce(
    recipe: Recipe, settings: TrainSettings, plan: Plan, examples: int, book: RecipeBook | None = None
) -> None:
    """Say what is about to train into the plan's folder and about how long it takes (:func:`estimate`,
    from the count of its ``examples``), and warn when that is beyond a year (:data:`ABSURD_SECONDS`):
    a number mistyped, which the run would otherwise take up in silence."""
    resuming = not settings.overwrite and any((f / CHECKPOINT / CHECKPOINT_STATE).exists() for f in plan.folders())
    found = estimate(recipe, book, settings.device, settings.data(), examples)
    logger.info(
        "%s %s (%s; key %s) in %s: %s",
        "resuming" if resuming else "training",
        recipe.display_name,
        recipe.summary(),
        recipe.key,
        plan.out,
        found,
    )
    if found.seconds is not None and found.seconds > ABSURD_SECONDS:
        logger.warning(
            "%s would train for about %s (%s steps); check --max-steps and --epochs, or stop it with Ctrl-C",
            recipe.display_name,
            duration(found.seconds),
            f"{found.steps:,}",
        )
