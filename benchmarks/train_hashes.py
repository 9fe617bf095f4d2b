"""The state of a recipe's training after its first steps, hashed: the weights (every parameter of the
method, training heads included), the optimizer, the RNG states and the loop's position.

A change that should not change what is trained (a refactor, a faster kernel that keeps the floats)
must leave these hashes as they were. Each checkout trains with its own code and its own ``.venv``,
through the command line whose flags every version shares::

    python benchmarks/train_hashes.py --checkout ../old --checkout . --steps 12

In smoke mode (``BENCHMARK_SMOKE=1``) it trains this checkout's simcse for one step.

``benchharness train <recipe> --stop-after N --out <tmp>`` stops a recipe's own run (its schedule,
its dev evaluation at step 0) after step N and leaves the resumable checkpoint, which holds all of
it. The runs and Hugging Face settings are each checkout's ``benchharness.toml``; training writes
only into a temporary folder. Prints one row per recipe and checkout, and whether they agree, and
keeps them in ``results/benchmarks/train_hashes.txt``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_RECIPES = ("simcse", "consert", "paser", "defsent-plus")


def _feed(digest: Any, value: Any) -> None:
    """A canonical serialisation of a checkpoint's nested values into ``digest``: tensors by dtype,
    shape and bytes; mappings in key order; floats by their exact representation."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        digest.update(b"{")
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _feed(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, (list, tuple)):
        digest.update(b"[")
        for item in value:
            _feed(digest, item)
        digest.update(b"]")
    else:
        digest.update(repr(value).encode())


def hash_of(value: Any) -> str:
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()[:16]


def checkpoint_hashes(path: Path) -> dict[str, str]:
    """Weights, optimizer (with scheduler and scaler), RNG and loop-state hashes of a checkpoint;
    the loop state leaves out its wall time."""
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=True)
    state = {k: v for k, v in saved["state"].items() if k != "train_seconds"}
    rngs = saved.get("rank_rngs", saved["rng"])
    return {
        "weights": hash_of(saved["method"]),
        "optimizer": hash_of([saved["optimizer"], saved["scheduler"], saved["scaler"]]),
        "rng": hash_of(rngs),
        "loop": hash_of(state),
    }


def train_and_hash(checkout: Path, recipe: str, steps: int, work: Path) -> dict[str, str]:
    """Train ``recipe`` with ``checkout``'s code for ``steps`` steps into ``work``; the hashes."""
    python = checkout / ".venv" / "bin" / "python"
    out = work / recipe
    method = recipe.split("-")[0] if not recipe.startswith("defsent-plus") else "defsent-plus"
    command = [str(python), "-m", "benchharness.cli", "train", method]
    if recipe != method:
        command += ["--recipe", recipe]
    command += ["--out", str(out), "--stop-after", str(steps), "--device", "cpu", "-q"]
    env = {**os.environ, "BENCHHARNESS_RUNS": str(work / "runs")}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(command[1:])} failed:\n{done.stderr[-2000:]}")
    # DefSent+ writes one folder per round: the first round holds the checkpoint
    state = next(p for p in (out, out.with_name(f"{out.name}-r1")) if (p / "checkpoint" / "state.pt").is_file())
    return checkpoint_hashes(state / "checkpoint" / "state.pt")


def main() -> int:
    from machine import SMOKE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, action="append", required=not SMOKE, help="a checkout with its .venv")
    parser.add_argument("--recipes", default="simcse" if SMOKE else ",".join(DEFAULT_RECIPES))
    parser.add_argument("--steps", type=int, default=1 if SMOKE else 12)
    args = parser.parse_args()
    args.checkout = args.checkout or [Path(__file__).resolve().parents[1]]
    from machine import header, report

    recipes = [r.strip() for r in args.recipes.split(",") if r.strip()]
    lines = [header()]
    rows: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for recipe in recipes:
        for checkout in args.checkout:
            with tempfile.TemporaryDirectory() as tmp:
                hashes = train_and_hash(checkout.resolve(), recipe, args.steps, Path(tmp))
            label = subprocess.run(
                ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            label = f"{checkout} @ {label}{'+dirty' if dirty else ''}"
            rows.setdefault(recipe, []).append((label, hashes))
            lines.append(f"{recipe:14s} {label}: " + " ".join(f"{k} {v}" for k, v in hashes.items()))
    agree = all(len({tuple(h.items()) for _, h in found}) == 1 for found in rows.values())
    lines.append(f"after {args.steps} steps: {'equal' if agree else 'DIFFERENT'} across {len(args.checkout)} checkouts")
    report("train_hashes", lines)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
