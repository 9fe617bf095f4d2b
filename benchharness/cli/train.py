"""``benchharness train <method>``: the command line of a ``methods`` plugin, the one place where
argparse meets training. Each method's flags come from its declaration (its options class and
presets, ``benchharness.training.options``), the run-time flags from ``settings.RUNTIME``; the flags
given turn into a recipe (``benchharness.training.recipes``), a plan and the training settings (with
the STS-B dev evaluation, ``benchharness.training.dev_eval.for_training``), built once and handed to
``train.train_with``.

Without ``--out`` the recipe trains into its run-store folder (``benchharness.training.runstore``),
where ``benchharness run --encoders <name>`` finds it; with ``--out`` it trains into that folder,
which ``run --encoders <folder>`` evaluates and ``SentenceTransformer(<folder>)`` loads, and which
``--name N`` registers in the runs folder under N.

``--nproc N`` trains in N processes (DistributedDataParallel through torchrun, which the command
starts); ``torchrun --nproc-per-node N -m benchharness.cli train ...`` works too, its world size
taking the place of ``--nproc``. A data-parallel run is a recipe of its own (its key holds the
world size and ``--negatives``).

``--seeds 1,2,3`` trains the recipe once per seed: each seed is a recipe of its own (the seed is
one of its settings, so it gets its own key and run folder and resumes on its own; with ``--out``
the folders are ``<out>-s<seed>``), and the leaderboard merges the seeds' results into
``mean ±std`` (their recipes differ only in the seed).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchharness.cli.messages import bars_shown
from benchharness.cli.options import add_unavailable, raise_unavailable
from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import PLUGINS

if TYPE_CHECKING:
    from benchharness.training.method import Method
    from benchharness.training.options import Option
    from benchharness.training.plan import Plan
    from benchharness.training.recipes import Recipe
    from benchharness.training.settings import TrainSettings

logger = logging.getLogger(__name__)

HELP = "train an encoder with a method of the field"
#: attempts after a Ray worker training a seed dies
RAY_RETRIES = 3
#: the exit status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it
INTERRUPTED = 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="method", required=True)
    for name, method in PLUGINS.load_all("methods").items():
        sp = sub.add_parser(name, help=method.help)
        add_method_arguments(sp, method)
        sp.add_argument(
            "--seeds",
            help="comma list: train the recipe once per seed (each its own recipe key; with --out, in <out>-s<seed>)",
        )
        sp.add_argument(
            "--executor",
            choices=["local", "ray"],
            help="with --seeds: local trains one seed after another (default); ray trains each seed as a "
            "Ray task on a GPU when the cluster has one (needs the 'distributed' extra)",
        )
        sp.add_argument("--address", help="with --executor ray: the Ray cluster to join (default: start a local one)")
    add_unavailable(sub, "methods")


def add_option(group: argparse._ArgumentGroup, name: str, meta: Option, default: Any) -> None:
    """One declared option's flags (``training.options.option``): unset flags stay None, so that a
    recipe can tell the values a user gave from those it leaves to its preset; an option without a
    default is a required flag."""
    from dataclasses import MISSING

    flag = meta.flag_for(name)
    assert flag is not None  # only options with a flag are added
    if isinstance(default, bool):
        group.add_argument(flag, dest=name, action="store_true", default=None, help=meta.help)
        if meta.off_flag:
            group.add_argument(meta.off_flag, dest=name, action="store_false", default=None, help=meta.off_help)
        return
    parse: dict[str, Any] = {} if meta.parse is None else {"type": meta.parse}
    required = default is MISSING
    group.add_argument(flag, dest=name, required=required, choices=meta.choices, help=meta.help, **parse)


def add_method_arguments(parser: argparse.ArgumentParser, method: Method[Any]) -> None:
    """The flags of ``benchharness train <method>``: the recipe, base and output, the shared options,
    the run-time settings, then the method's own options."""
    from benchharness.training.options import TrainingOptions, declared

    shared = set(TrainingOptions.__dataclass_fields__)
    options = [(n, m, d) for n, m, d in declared(method.options) if m.flag_for(n) is not None]
    g = parser.add_argument_group("training (shared by all methods)")
    g.add_argument(
        "--recipe",
        help="start from this named recipe (default: the one named after the method; "
        "see benchharness/training/recipes.toml); the flags below change it",
    )
    g.add_argument("--base", help="Hugging Face model id or folder of the encoder to fine-tune (default: the recipe's)")
    for key in ("out", "name"):
        _add_runtime(g, key)
    if method.presets:
        g.add_argument(
            "--preset",
            choices=sorted(method.presets),
            help=f"hyper-parameter preset (default {method.default_preset}); explicit flags override it",
        )
    for name, meta, default in options:
        if name in shared:
            add_option(g, name, meta, default)
    for key in ("device", "threads", "stop_after", "keep_checkpoint", "overwrite", "quiet"):
        _add_runtime(g, key)
    g.add_argument("--show", action="store_true", help="print the recipe these flags give, with its key, and exit")
    own = parser.add_argument_group(method.title)
    for name, meta, default in options:
        if name not in shared:
            add_option(own, name, meta, default)
    if method.describe_data is not None:
        own.add_argument(
            "--stats-only", action="store_true", default=None, help="print the training data's statistics and exit"
        )


def _add_runtime(group: argparse._ArgumentGroup, key: str) -> None:
    """A run-time key's flag (a switch is None when not given, but ``--quiet``, False)."""
    from benchharness.training.settings import RUNTIME

    flag = RUNTIME[key]
    if flag.switch:
        group.add_argument(*flag.flags, action="store_true", default=False if key == "quiet" else None, help=flag.help)
    else:
        parse: dict[str, Any] = {} if flag.parse is None else {"type": flag.parse}
        group.add_argument(*flag.flags, help=flag.help, **parse)


def _world_size(given: dict[str, Any]) -> None:
    """Under torchrun, the world size is the run's ``--nproc`` (part of its recipe): filled in when
    not given, refused when it differs."""
    from benchharness.training.data_parallel import launched_world_size

    world = launched_world_size()
    if world == 1:
        return
    if given.get("nproc") is None:
        given["nproc"] = world
    elif given["nproc"] != world:
        raise InvalidInputError(
            f"--nproc {given['nproc']} but torchrun started {world} processes; give the same number "
            "to both, or leave --nproc out under torchrun"
        )


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The method's options the flags give (a flag left out is None, and not given)."""
    from benchharness.training import recipes
    from benchharness.training.options import declared

    method = recipes.method_named(args.method)
    return {
        n: getattr(args, n)
        for n, meta, _ in declared(method.options)
        if meta.flag_for(n) is not None and getattr(args, n, None) is not None
    }


def recipe_of(args: argparse.Namespace) -> Recipe:
    """The recipe the flags ask for: the method's options given, on top of ``--recipe``, ``--base``
    and ``--preset``."""
    from benchharness.training import recipes

    given = given_options(args)
    _world_size(given)
    return recipes.derive(
        args.method,
        given,
        recipe=args.recipe,
        base=args.base,
        preset=getattr(args, "preset", None),
        book=recipes.load_book(config=args.configuration),
    )


def settings_of(args: argparse.Namespace) -> TrainSettings:
    """How and where the flags say to train: the configuration read once, the run-time flags, the
    harness's dev evaluation."""
    from benchharness.training.dev_eval import for_training
    from benchharness.training.settings import TrainSettings

    return TrainSettings(
        config=args.configuration,
        device=args.device,
        threads=args.threads,
        stop_after=args.stop_after,
        overwrite=bool(args.overwrite),
        keep_checkpoint=bool(args.keep_checkpoint),
        progress=bars_shown(args.quiet),
        dev=for_training,
    )


def plan_of(args: argparse.Namespace, recipe: Recipe) -> Plan:
    """What the flags train and into where: ``--out`` (else the recipe's run-store folder) under
    ``--name`` (else the recipe's name), which registers the run when given."""
    from benchharness.training.plan import Plan
    from benchharness.training.runstore import RunStore

    if args.out is None:
        if args.name is not None:
            raise InvalidInputError(
                f"--name names a run in an --out folder; a run-store run is named by its recipe ({recipe.display_name})"
            )
        return Plan.of(recipe, out=RunStore(args.configuration.runs_dir).out(recipe))
    register = getattr(args, "register", args.name is not None)  # one seed's run: as the command's --name says
    return Plan.of(recipe, out=Path(args.out), name=args.name, register=register)


def _train_one(args: argparse.Namespace) -> int:
    from benchharness.training import recipes
    from benchharness.training.data_parallel import is_main, launch, launched_world_size
    from benchharness.training.runstore import RunStore
    from benchharness.training.settings import RUNTIME
    from benchharness.training.train import train_in_store, train_with

    recipe = recipe_of(args)
    if getattr(args, "show", False):
        print(json.dumps({"name": recipe.display_name, **recipe.record()}, indent=2))
        return 0
    settings = settings_of(args)
    if getattr(args, "stats_only", None):
        from benchharness.training.train import describe

        print(describe(settings, plan_of(args, recipe)))
        return 0
    nproc = recipe.options.get("nproc", 1)
    if nproc > 1 and launched_world_size() == 1:  # the same command, in nproc processes that torchrun starts
        runtime = {k: getattr(args, k) for k in RUNTIME if getattr(args, k, None) not in (None, False)}
        words = recipes.command_words(recipe, **runtime)
        if args.configuration.file is not None:  # the processes read the configuration this one read
            words = ["--config", str(args.configuration.file), *words]
        status = launch(nproc, __package__, words)  # python -m benchharness.cli
        if status != 0:
            raise InvalidInputError(
                f"data-parallel training of {recipe.display_name} failed (torchrun exit status "
                f"{status}; the processes' errors are above); rerun the command to resume it"
            )
        return 0
    plan = plan_of(args, recipe)
    if args.out is not None:
        runs = train_with(settings, plan, recipes.load_book(config=args.configuration))
        for run in runs:
            if run.completed and run.manifest is not None and run.out is not None and is_main():
                logger.info("%s", resolvable_as(run.out, run.manifest["name"], args.configuration.runs_dir))
        return 0
    store = RunStore(args.configuration.runs_dir)
    if store.finished(recipe) and not args.overwrite:
        print(
            f"{recipe.display_name} (recipe {recipe.key}) is already trained: {store.encoder_folder(recipe)}; "
            "--overwrite retrains it"
        )
        return 0
    train_in_store(settings, recipe)
    if not is_main():  # a rank > 0 under torchrun: rank 0 reports
        return 0
    if store.finished(recipe):
        print(
            f"recipe {recipe.key} trained in {store.folder(recipe)}; evaluate it with: "
            f"benchharness run --encoders {recipe.display_name} --tasks sts"
        )
    else:
        print(
            f"stopped before the end; rerun `{recipes.command(recipe)}` (or ask for {recipe.display_name} in "
            "`benchharness run`) to resume"
        )
    return 0


def resolvable_as(out: Path, name: str, runs_dir: Path) -> str:
    """What ``run --encoders`` accepts for a finished run: its name when the runs folder registers
    it under that name (``registered_runs``), else its folder, absolute (a folder resolves by its manifest.json
    from anywhere; a name only where ``registered_runs`` finds it, directly under the runs folder)."""
    from benchharness.core.manifests import registered_runs

    folder = out.resolve()
    registered = registered_runs(runs_dir).get(name)
    if registered is not None and registered.resolve() == folder:
        return (
            f"encoder registered: {name} (in {folder}); evaluate it with: benchharness run --encoders "
            f"{shlex.quote(name)} --tasks sts"
        )
    return (
        f"encoder saved in {folder} ({name}); evaluate it with: benchharness run --encoders "
        f"{shlex.quote(str(folder))} --tasks sts"
    )


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; anything else is refused with the value named."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidInputError(f"--seeds takes a comma list of integers such as 1,2,3, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise InvalidInputError(f"--seeds needs distinct non-negative integers, got {text!r}")
    return seeds


def per_seed(args: argparse.Namespace, seed: int) -> argparse.Namespace:
    """The arguments of one seed's run (with ``--out``: its own folder and registry name)."""
    one = copy.copy(args)
    one.seed = seed
    one.seeds = None  # each seed's run is a single-seed run: its recipe holds the seed, not the list
    if args.out is not None:
        out = Path(args.out)
        one.out = out.with_name(f"{out.name}-s{seed}")
        one.name = f"{args.name or out.name}-s{seed}"
        one.register = args.name is not None  # a name given registers each seed's run
    return one


def check_outputs(args: argparse.Namespace, seeds: list[int] | None) -> None:
    """Every folder the command will train into (each seed's ``--out`` folder, else the runs
    folder), checked before the first model loads; ``--show`` writes nothing."""
    from benchharness.cli.options import check_output

    if getattr(args, "show", False):
        return
    if getattr(args, "out", None) is None:
        check_output(args.configuration.runs_dir, "folder", "the runs folder")
        return
    each: list[int | None] = list(seeds) if seeds else [None]
    for seed in each:
        check_output(args.out if seed is None else per_seed(args, seed).out, "folder", "--out")


def main(args: argparse.Namespace) -> int:
    """Train as the flags say; a Ctrl-C ends in one line that says what is kept and how to go on,
    with the shell's status for an interrupted command (130)."""
    from benchharness.training.resume import Interrupted

    try:
        return _main(args)
    except Interrupted as exc:
        print(f"benchharness: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print(  # not inside a training loop (loading, a torchrun launcher, a Ray driver): what was saved stays
            "benchharness: interrupted; what was saved before is kept (finished runs, the last checkpoint); "
            "rerun the same command to go on",
            file=sys.stderr,
        )
    return INTERRUPTED


def _main(args: argparse.Namespace) -> int:
    raise_unavailable(args)
    seeds = getattr(args, "seeds", None)
    on_ray = getattr(args, "executor", None) == "ray"
    if (on_ray or getattr(args, "address", None)) and not seeds:
        raise InvalidInputError("--executor ray and --address spread a seed grid over a Ray cluster; give --seeds too")
    if not seeds:
        check_outputs(args, None)
        return _train_one(args)
    if getattr(args, "seed", None) is not None:
        raise InvalidInputError("give either --seed or --seeds, not both")
    grid = parse_seeds(seeds)
    check_outputs(args, grid)
    if on_ray:
        return _train_on_ray(args, grid)
    status = 0
    for seed in grid:
        print(f"== seed {seed}")
        status = max(status, _train_one(per_seed(args, seed)))
    return status


def _train_on_ray(args: argparse.Namespace, seeds: list[int]) -> int:
    """Each seed's run as a Ray task, on a GPU when the cluster has one, retried if its worker dies
    (the retry resumes from the run's checkpoint where the node sees the same folder). Each run writes
    its own folder, on the node that trains it."""
    import os

    from benchharness.evaluation.ray_cluster import ray_session, slot

    if (getattr(args, "nproc", None) or 1) > 1:
        raise InvalidInputError(
            "--executor ray trains each seed in one process; leave out --nproc (or train the "
            "seeds one after another with torchrun)"
        )
    for seed in seeds:  # every seed's recipe is checked before anything starts
        recipe_of(per_seed(args, seed))
    status = 0
    with ray_session(args.address) as ray:
        remote = ray.remote(max_retries=RAY_RETRIES, **slot(ray))(train_seed)
        pending = {remote.remote(args, seed, os.getcwd()): seed for seed in seeds}
        while pending:
            (done,), _ = ray.wait(list(pending), num_returns=1)
            seed = pending.pop(done)
            try:
                code = ray.get(done)
            except Exception as exc:  # retries exhausted, or the run raised
                text = str(exc).strip()
                print(f"== seed {seed} failed: {text.splitlines()[-1] if text else type(exc).__name__}")
                code = 1
            else:
                print(f"== seed {seed} finished (exit status {code})")
            status = max(status, code)
    return status


def train_seed(args: argparse.Namespace, seed: int, folder: str) -> int:
    """One seed's run on a Ray worker, from the driver's folder when this node sees it."""
    from benchharness.evaluation.ray_cluster import enter_driver_folder

    enter_driver_folder(folder)
    return _train_one(per_seed(args, seed))
