"""The SentEval transfer suite of glove-50d on an idle machine and beside a competing 2-thread job,
in one run: on a shared 2-core machine a fair share is 2x the idle time.

The competitor is a separate process doing float32 matrix products on 2 threads (torch, as another
researcher's training would), started before the contended run and stopped after it. Each run is
``benchharness run --encoders glove-50d --tasks <tasks> --overwrite always`` in a fresh process,
results in a scratch folder. Run from the checkout root:

    python benchmarks/contention.py [--tasks transfer]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from machine import SMOKE, cli_command

COMPETITOR = """
import torch
torch.set_num_threads(2)
a = torch.randn(1024, 1024)
while True:
    a = torch.tanh(a @ a * 1e-3)
"""


def timed(tasks: str, env: dict[str, str]) -> float:
    run = cli_command("run", "--encoders", "glove-50d", "--tasks", tasks, "--overwrite", "always", "--quiet")
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        subprocess.run(
            [*run, "--results-dir", out],
            check=True,
            capture_output=True,
            env=env,
        )
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="transfer")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(tasks="SICKRelatedness-trial")
    args = parser.parse_args()
    env = dict(os.environ)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; OMP_WAIT_POLICY={env.get('OMP_WAIT_POLICY', '(unset)')}")
    idle = timed(args.tasks, env)
    # the other job keeps OpenMP's default (busy-waiting) threads, whatever this process is given
    competitor = subprocess.Popen(
        [sys.executable, "-c", COMPETITOR], env={k: v for k, v in env.items() if k != "OMP_WAIT_POLICY"}
    )
    try:
        time.sleep(0.5 if SMOKE else 3)  # let it reach full speed
        busy = timed(args.tasks, env)
    finally:
        competitor.kill()
        competitor.wait()
    print(
        f"glove-50d on {args.tasks}: idle {idle:.1f} s, beside a 2-thread job {busy:.1f} s, ratio {busy / idle:.2f}x "
        "(fair share 2x; target at most 2.5x)"
    )


if __name__ == "__main__":
    main()
