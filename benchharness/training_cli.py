"""``benchharness train <method>``: the core side of training, which hands the method's command
the STS-B dev evaluator. Encoders know no evaluation task, so the evaluator is built here, in the
core, and passed down as a factory (``benchharness.dev_eval.for_training``).

``--seeds 1,2,3`` trains the same recipe once per seed, each in its own run folder
(``<out>-s<seed>``, registered as ``<name>-s<seed>``), so that every seed resumes on its own
(rerun the same command) and the leaderboard can merge the seeds' results into ``mean ±std``
(their manifests differ only in the seed).
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; anything else is refused with the value named."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--seeds takes a comma list of integers such as 1,2,3, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds needs distinct integers, got {text!r}")
    return seeds


def per_seed(args: argparse.Namespace, seed: int) -> argparse.Namespace:
    """The arguments of one seed's run: its own folder and registry name."""
    one = copy.copy(args)
    one.seed = seed
    out = Path(args.out)
    one.out = out.with_name(f"{out.name}-s{seed}")
    one.name = f"{args.name or out.name}-s{seed}"
    return one


def main(args: argparse.Namespace) -> int:
    from benchharness.dev_eval import for_training
    from encoders.methods import METHODS

    method = METHODS[args.method]
    seeds = getattr(args, "seeds", None)
    if not seeds:
        return method.main(args, dev=for_training)
    if getattr(args, "seed", None) is not None:
        raise ValueError("give either --seed or --seeds, not both")
    status = 0
    for seed in parse_seeds(seeds):
        print(f"== seed {seed}")
        status = max(status, method.main(per_seed(args, seed), dev=for_training))
    return status
