"""Vectors computed elsewhere score what the model scores inside the harness: the STS suite through
``benchharness sentences`` -> an outside encoding -> ``vectors:DIR``, against ``minilm-l3`` run by
the harness (fresh) and its stored results.

1. ``benchharness sentences --tasks sts --out DIR`` (the command, in its own process);
2. in another process that imports no benchharness, ``SentenceTransformer(paraphrase-MiniLM-L3-v2)
   .encode(lines)`` saved as ``DIR/vectors.npy``: what a user does where the model runs;
3. ``vectors:DIR`` and ``minilm-l3`` evaluated on every STS task (no embedding cache), each task's
   two scores and the stored one printed, and the largest difference, which must be <= 0.01 (x100):
   the harness encodes with its own engine (batches of equal token length), sentence-transformers
   pads each batch to its longest sentence, which moves vectors in their last float bits only.

    python benchmarks/vectors_roundtrip.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import SMOKE, cli_command, header, report

from benchharness.core.settings import Config, apply_environment, load_config

ROOT = Path(__file__).resolve().parents[1]
HUB_ID = "sentence-transformers/paraphrase-MiniLM-L3-v2"
MODEL = "minilm-l3"
#: the STS group (smoke mode: SICK-R's 500 trial pairs)
SELECTION = "SICKRelatedness-trial" if SMOKE else "sts"
#: largest difference (x100) allowed between the scores of vectors:DIR and of the model run inside
TOLERANCE = 0.01


def encode_elsewhere(folder: str) -> None:
    """Step 2, in a process of its own: the lines encoded by sentence-transformers alone."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    with open(Path(folder) / "sentences.jsonl", encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for line in fh]
    model = SentenceTransformer(HUB_ID, device="cpu")
    np.save(Path(folder) / "vectors.npy", model.encode(texts).astype(np.float32))


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0, done.stdout


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--encode":
        encode_elsewhere(sys.argv[2])
        return 0
    config = load_config()
    apply_environment(config)  # HF_HUB_CACHE and HF_HUB_OFFLINE from benchharness.toml, for the child too
    lines = [header()]
    folder = tempfile.mkdtemp(prefix="vectors-roundtrip-")
    try:
        return _measure(lines, folder, config)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(lines: list[str], folder: str, config: Config) -> int:
    import benchharness
    from benchharness.core.results import ResultStore

    write_s, said = _run(cli_command("sentences", "--tasks", SELECTION, "--out", folder, "-q"))
    lines.append(
        f"step 1, benchharness sentences --tasks {SELECTION}: {write_s:.1f} s; {said.splitlines()[0]}".replace(
            folder, "DIR"
        )
    )
    encode_s, _ = _run(
        [sys.executable, __file__, "--encode", folder],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    lines.append(
        f"step 2, SentenceTransformer({HUB_ID!r}).encode(lines) in its own process: {encode_s:.1f} s "
        f"(model load included)"
    )
    t0 = time.perf_counter()
    served = benchharness.evaluate(f"vectors:{folder}", SELECTION)
    vectors_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh = benchharness.evaluate(MODEL, SELECTION)
    model_s = time.perf_counter() - t0
    lines.append(
        f"step 3, evaluate vectors:DIR {vectors_s:.1f} s; evaluate {MODEL} (encodes, no cache) {model_s:.1f} s"
    )
    stored = ResultStore(config.results_dir)
    lines += [
        "",
        (
            f"{'task':22s} {'vectors:DIR':>12s} {MODEL + ' fresh':>16s} {'|diff|':>8s} "
            f"{MODEL + ' stored':>17s} {'|diff|':>8s}"
        ),
    ]
    worst = 0.0
    for result in served.results:
        own = fresh.get(MODEL, result.task).main_score
        kept = stored.load(MODEL, result.task)
        diff = abs(result.main_score - own)
        kept_diff = None if kept is None else abs(result.main_score - kept.main_score)
        worst = max(worst, diff, kept_diff or 0.0)
        lines.append(
            f"{result.task:22s} {result.main_score:12.4f} {own:16.4f} {diff:8.5f} "
            + ("(none)" if kept is None else f"{kept.main_score:17.4f} {kept_diff:8.5f}")
        )
    ok = worst <= TOLERANCE and len(served.results) == len(fresh.results) > 0
    lines += ["", f"largest difference {worst:.5f} (x100 scale): {'within' if ok else 'NOT within'} {TOLERANCE}"]
    report("vectors_roundtrip", lines)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
