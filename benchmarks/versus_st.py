"""What a benchmark of benchharness beside one of sentence-transformers' evaluators shares, whatever it
evaluates (STS, reranking, retrieval): each tool runs in a fresh process of its own, so that its wall
time and peak memory are its own (``spawn`` starts the script again as a worker; ``measure`` is the
worker's side, which prints one result line), and the lines that compare the two tools' scores and
times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def measure(run: Callable[[], dict], device: str) -> None:
    """Run one tool in this (fresh) process and print its result line: wall time, peak memory and
    what ``run`` returned (``metrics``)."""
    import torch

    from benchharness.core.resources import peak_cuda_mib, peak_rss_mib
    from benchharness.core.settings import apply_environment, load_config

    apply_environment(load_config())
    t0 = time.perf_counter()
    metrics = run()
    if device.startswith("cuda"):  # the work done, not kernels still queued
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "peak_rss_mb": peak_rss_mib(), "peak_cuda_mb": peak_cuda_mib(torch.device(device))}
    print("RESULT " + json.dumps({**out, "metrics": metrics}))


def spawn(script: str, arguments: list[str]) -> dict[str, Any]:
    """``script`` run as a worker in a fresh process; the result line it printed."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([sys.executable, script, *arguments], capture_output=True, text=True, env=env, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"worker {arguments} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(line[7:])
    return result


def metric_lines(
    ours: Mapping[str, float],
    theirs: Mapping[str, float],
    names: Sequence[str],
    figures: Sequence[str] = (),
    column: str = "metric",
) -> tuple[list[str], float]:
    """A table of each of ``names`` on both sides and their difference, and the largest difference;
    ``figures``: rows shown after them but left out of the largest difference (what both tools report
    of the model, not a score)."""
    lines = [f"{column:20s} {'benchharness':>13s} {'sent-transf.':>13s} {'abs diff':>9s}"]
    worst = 0.0
    for name in (*names, *figures):
        diff = abs(ours[name] - theirs[name])
        worst = max(worst, diff) if name in names else worst
        lines.append(f"{name:20s} {ours[name]:13.4f} {theirs[name]:13.4f} {diff:9.5f}")
    return lines, worst


def timing_lines(runs: Mapping[str, Mapping[str, Any]], timed: str, repeats: int = 1) -> list[str]:
    """Each tool's wall time (``timed``: what it includes) and peak memory (``runs``: label -> result,
    sentence-transformers' first, benchharness's second), and the speed ratio."""
    lines = [f"wall time ({timed}, best of {repeats}):"]
    width = max(map(len, runs))
    for label, run in runs.items():
        cuda = f", peak CUDA {run['peak_cuda_mb']:.0f} MB" if run.get("peak_cuda_mb") is not None else ""
        lines.append(f"  {label:{width}s} {run['seconds']:8.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB{cuda}")
    st, bh = runs.values()
    lines.append(f"  speed ratio (sentence-transformers / benchharness): {st['seconds'] / bh['seconds']:.2f}x")
    return lines
