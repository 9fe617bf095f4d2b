"""``benchharness train <method>``: the core side of training, which hands the method's command
the STS-B dev evaluator. Encoders know no evaluation task, so the evaluator is built here, in the
core, and passed down as a factory (``benchharness.dev_eval.for_training``).
"""

from __future__ import annotations

import argparse


def main(args: argparse.Namespace) -> int:
    from benchharness.dev_eval import for_training
    from encoders.methods import METHODS

    return METHODS[args.method].main(args, dev=for_training)
