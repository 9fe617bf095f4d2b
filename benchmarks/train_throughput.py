"""Training throughput of a recipe: seconds per optimizer step and sentences per second.

Runs a recipe (``encoders/methods/recipes.toml``) through its method's own command for a few steps
in a temporary folder and prints one JSON line, ready for the recipe file's ``[[throughput]]``
table, from which ``benchharness run`` estimates how long training on demand takes. Only the
optimizer steps are timed (the loop's own clock): the dev evaluation is skipped and loading the
data and model is not counted. Each recipe should run in its own process (peak RSS is the
process maximum)::

    python benchmarks/train_throughput.py --recipe paser --steps 20
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from datetime import date
from pathlib import Path

import torch
from torch import nn

from benchharness.core.settings import apply_environment, load_config


class SkippedDev:
    """A dev evaluation that scores nothing: the benchmark times optimizer steps only."""

    task_name = "none (throughput benchmark)"

    def __call__(self, encoder: nn.Module) -> float:
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", required=True, help="a recipe name of encoders/methods/recipes.toml")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device")
    parser.add_argument("--machine", default=f"{platform.machine()} {torch.get_num_threads()} threads",
                        help="how the throughput table names this machine")
    args = parser.parse_args()
    apply_environment(load_config())

    from benchharness.training.on_demand import device_kind, train_into
    from benchharness.training.recipes import load_book

    recipe = load_book().get(args.recipe)
    if recipe.base_recipe is not None:
        parser.error(f"{args.recipe} continues {recipe.base_recipe.display_name}: time that recipe instead")
    runtime = {"stop_after": args.steps, "quiet": True, "device": args.device, "threads": args.threads}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        train_into(recipe, out, dev=lambda method, config: SkippedDev(),
                   runtime={k: v for k, v in runtime.items() if v is not None})
        state_file = (out if recipe.rounds is None else out.with_name("run-r1")) / "checkpoint" / "state.pt"
        state = torch.load(state_file, map_location="cpu", weights_only=False)["state"]
    seconds = state["train_seconds"]
    print(json.dumps({"recipe": args.recipe, "method": recipe.method, "base": recipe.base,
                      "device": device_kind(args.device), "batch_size": recipe.options["batch_size"],
                      "max_length": recipe.options["max_length"], "steps": state["step"],
                      "seconds_per_step": round(seconds / state["step"], 2),
                      "sentences_per_second": round(state["sentences"] / seconds, 2),
                      "machine": args.machine, "date": date.today().isoformat(),
                      "command": f"python benchmarks/train_throughput.py --recipe {args.recipe} --steps {args.steps}"}))


if __name__ == "__main__":
    main()
