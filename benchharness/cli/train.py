"""``benchharness train <method>``: the command line of a ``methods`` plugin turned into a recipe
(``benchharness.training.recipes``), trained with the STS-B dev evaluation
(``benchharness.training.dev_eval.for_training``), which the method receives as a factory since
encoders know no evaluation task.

Without ``--out`` the recipe trains into its run-store folder (``benchharness.training.runstore``),
where ``benchharness run --encoders <name>`` finds it; with ``--out`` it trains into that folder,
which registers under its folder name.

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
from pathlib import Path

from benchharness.cli.options import add_unavailable, raise_unavailable
from benchharness.core.errors import InvalidInputError
from benchharness.core.plugins import PLUGINS

HELP = "train an encoder with a method of the field"
#: attempts after a Ray worker training a seed dies
RAY_RETRIES = 3

#: flags passed to the method's command as they are: how and where it runs, not what it trains
RUNTIME = ("device", "threads", "stop_after", "overwrite", "quiet", "keep_checkpoint", "stats_only", "name")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="method", required=True)
    for name, method in PLUGINS.load_all("methods").items():
        sp = sub.add_parser(name, help=method.HELP)
        method.add_arguments(sp)
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


def _world_size(args: argparse.Namespace) -> None:
    """Under torchrun, the world size is the run's ``--nproc`` (part of its recipe): filled in when
    not given, refused when it differs."""
    from benchharness.encoders.methods.data_parallel import launched_world_size

    world = launched_world_size()
    if world == 1:
        return
    if args.nproc is None:
        args.nproc = world
    elif args.nproc != world:
        raise InvalidInputError(
            f"--nproc {args.nproc} but torchrun started {world} processes; give the same number "
            "to both, or leave --nproc out under torchrun"
        )


def _train_one(args: argparse.Namespace) -> int:
    from benchharness.encoders.methods.data_parallel import is_main, launch, launched_world_size
    from benchharness.training import on_demand, recipes
    from benchharness.training.dev_eval import for_training
    from benchharness.training.runstore import RunStore

    _world_size(args)
    recipe = recipes.derive(args.method, args)
    if getattr(args, "show", False):
        print(json.dumps({"name": recipe.display_name, **recipe.record()}, indent=2))
        return 0
    runtime = {k: getattr(args, k) for k in RUNTIME if getattr(args, k, None) not in (None, False)}
    nproc = recipe.options.get("nproc", 1)
    if nproc > 1 and launched_world_size() == 1:  # the same command, in nproc processes that torchrun starts
        words = recipes.command_words(recipe, out=args.out, **runtime)
        status = launch(nproc, __package__, words)  # python -m benchharness.cli
        if status != 0:
            raise InvalidInputError(
                f"data-parallel training of {recipe.display_name} failed (torchrun exit status "
                f"{status}; the processes' errors are above); rerun the command to resume it"
            )
        return 0
    if args.out is not None:
        return on_demand.train_into(recipe, args.out, dev=for_training, runtime=runtime)
    if args.name is not None:
        raise InvalidInputError(
            f"--name names a run in an --out folder; a run-store run is named by its recipe ({recipe.display_name})"
        )
    store = RunStore()
    if store.finished(recipe) and not args.overwrite:
        print(
            f"{recipe.display_name} (recipe {recipe.key}) is already trained: {store.encoder_folder(recipe)}; "
            "--overwrite retrains it"
        )
        return 0
    on_demand.train_in_store(recipe, dev=for_training, runtime=runtime, store=store)
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
    return one


def check_outputs(args: argparse.Namespace, seeds: list[int] | None) -> None:
    """Every folder the command will train into (each seed's ``--out`` folder, else the runs
    folder), checked before the first model loads; ``--show`` writes nothing."""
    from benchharness.cli.options import check_output
    from benchharness.core.settings import load_config

    if getattr(args, "show", False):
        return
    if getattr(args, "out", None) is None:
        check_output(load_config().runs_dir, "folder", "the runs folder")
        return
    each: list[int | None] = list(seeds) if seeds else [None]
    for seed in each:
        check_output(args.out if seed is None else per_seed(args, seed).out, "folder", "--out")


def main(args: argparse.Namespace) -> int:
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
    from benchharness.training import recipes

    for seed in seeds:  # every seed's recipe is checked before anything starts
        recipes.derive(args.method, per_seed(args, seed))
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
