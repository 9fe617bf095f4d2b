"""Whether a dev evaluation before the training steps slows them, and the page faults of a step.

For each checkout given (its own ``.venv``), a recipe's first steps run in a fresh process, once
without a dev evaluation first and once after one STS-B dev evaluation in the run's precision (as
``eval_at_start`` makes), each ``--repeats`` times, alternating. Each line gives seconds per step (the
loop's own clock) and the minor page faults per step (``getrusage`` around the steps)::

    python benchmarks/steps_after_evaluation.py --checkout ../old --checkout . --precision bf16

A step slowed by what an evaluation left behind shows as a higher time after one; page faults show
fresh memory taken from the kernel instead of reused.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import SMOKE, config, data_root, header, report


class SkippedDev:
    """A dev evaluation inside the steps that scores nothing: only the one before them is made."""

    task_name = "none (benchmark)"

    def __call__(self, encoder) -> float:
        return float("nan")


def one_run(recipe_name: str, steps: int, precision: str, evaluate_first: bool) -> dict[str, object]:
    """In this process: the recipe's first ``steps`` steps, after one dev evaluation or not."""
    from benchharness.cli import process

    process.configure(["train", "--precision", precision], config())
    from dataclasses import replace

    import torch

    from benchharness.training import harness
    from benchharness.training.dev_eval import for_training
    from benchharness.training.plan import Plan
    from benchharness.training.recipes import load_book
    from benchharness.training.settings import TrainSettings
    from benchharness.training.train import train_with

    inner = harness.run_loop
    found: dict[str, object] = {}

    def measured(method, examples, options, settings, plan, **kw):
        if evaluate_first:
            t0 = time.perf_counter()
            for_training(method, options, settings)(method.encoder)
            found["evaluation_seconds"] = round(time.perf_counter() - t0, 2)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        result = inner(method, examples, options, settings, plan, **kw)
        found["faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        return result

    harness.run_loop = measured
    recipe = load_book().get(recipe_name)
    recipe = replace(recipe, typed=replace(recipe.typed, precision=precision))
    settings = TrainSettings(
        config=config(),
        data_dir=data_root().root,
        stop_after=steps,
        dev=lambda method, options, settings: SkippedDev(),
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        train_with(settings, Plan.of(recipe, out=out))
        folder = out if recipe.rounds is None else out.with_name("run-r1")
        state = torch.load(folder / "checkpoint" / "state.pt", map_location="cpu", weights_only=True)["state"]
    return {
        "evaluation_first": evaluate_first,
        "seconds_per_step": round(state["train_seconds"] / state["step"], 3),
        "page_faults_per_step": round(int(found["faults"]) / state["step"]),  # type: ignore[call-overload]
        **({"evaluation_seconds": found["evaluation_seconds"]} if evaluate_first else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", type=Path, help="a clone with its own .venv (repeat)")
    parser.add_argument("--recipe", default="consert")
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--inner", choices=("plain", "evaluated"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(one_run(args.recipe, args.steps, args.precision, args.inner == "evaluated")))
        return
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        args.checkout, args.precision, args.steps, args.repeats = [Path(__file__).resolve().parents[1]], "fp32", 1, 1
    lines = [header()]
    for checkout in args.checkout or [Path(".")]:
        checkout = checkout.resolve()
        commit = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
        for _ in range(args.repeats):
            for inner in ("plain", "evaluated"):
                venv = checkout / ".venv" / "bin" / "python"
                command = [str(venv) if venv.exists() else sys.executable, __file__, "--inner", inner]
                command += ["--recipe", args.recipe, "--precision", args.precision, "--steps", str(args.steps)]
                done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
                row = {"commit": commit, "recipe": args.recipe, "precision": args.precision}
                row.update(json.loads(done.stdout.strip().splitlines()[-1]))
                lines.append(json.dumps(row))
                print(lines[-1], flush=True)
    report(f"steps_after_evaluation_{args.precision}", lines)


if __name__ == "__main__":
    main()
