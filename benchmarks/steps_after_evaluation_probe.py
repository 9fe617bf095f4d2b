"""Whether bf16 training steps run slower after a bf16 evaluation pass, on a machine without the
project's data, models or package: a standalone probe (torch and transformers only) for machines such
as a lent GPU machine's CPU, beside ``steps_after_evaluation.py``, which runs the real recipe.

A BERT of paraphrase-MiniLM-L3-v2's shape with random weights (the speed of a step does not depend on
the weights) takes 16 bf16-autocast training steps of a ConSERT-sized batch (64 sequences of 20-32
tokens, an in-batch contrastive loss, torch's AdamW) in a fresh process pinned to 2 cores, once
without and once after an evaluation pass (3,000 sequences of 8-40 tokens, sorted by length, in
batches of 128 under ``inference_mode`` and bf16 autocast), three times each, alternating; then the
same with glibc keeping freed memory, as the command line sets it
(``benchharness.cli.process.keep_freed_memory``). Each line: seconds per step over steps 5-16, the
first four steps, minor page faults per step::

    python benchmarks/steps_after_evaluation_probe.py
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: glibc's mallopt parameters (malloc.h), as benchharness.cli.process sets them
M_MMAP_THRESHOLD, M_TRIM_THRESHOLD = -3, -1
THREADS = 2
#: smoke mode (``BENCHMARK_SMOKE=1``, as ``machine.py`` reads it; this script stands alone): two steps of
#: 8 sequences through a one-layer BERT of width 64, one round, a short evaluation: bf16 without native
#: support is emulated, and a step of 64 sequences of the real shape took about 14 s on an AVX2 CPU
SMOKE = os.environ.get("BENCHMARK_SMOKE") == "1"
STEPS, WARM = (2, 1) if SMOKE else (16, 4)
ROUNDS, EVALUATED, BATCH = (1, 64, 8) if SMOKE else (3, 3000, 64)
#: paraphrase-MiniLM-L3-v2's shape (hidden, layers, heads, feed-forward), or a tiny one in smoke mode
SHAPE = (64, 1, 2, 128) if SMOKE else (384, 3, 12, 1536)


def child(evaluate_first: bool, keep_freed_memory: bool) -> dict[str, object]:
    """One fresh process's measurement."""
    os.sched_setaffinity(0, set(range(THREADS)))
    if keep_freed_memory:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)
        libc.mallopt(M_TRIM_THRESHOLD, 2 << 30)
    import resource

    import torch
    import torch.nn.functional as F
    from transformers import BertConfig, BertModel

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    hidden, layers, heads, feed_forward = SHAPE
    config = BertConfig(
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=feed_forward
    )
    model = BertModel(config)
    g = torch.Generator().manual_seed(1)
    out: dict[str, object] = {"evaluation_first": evaluate_first, "keep_freed_memory": keep_freed_memory}
    if evaluate_first:
        model.eval()
        lengths = sorted(torch.randint(8, 40, (EVALUATED,), generator=g).tolist())
        t0 = time.perf_counter()
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            for start in range(0, len(lengths), 128):
                rows = lengths[start : start + 128]
                ids = torch.randint(1000, 2000, (len(rows), rows[-1]), generator=g)
                model(input_ids=ids, attention_mask=torch.ones_like(ids))
        out["evaluation_seconds"] = round(time.perf_counter() - t0, 2)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    times = []
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(STEPS):
        ids = torch.randint(1000, 2000, (BATCH, int(torch.randint(20, 33, (1,), generator=g))), generator=g)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.mean(1).float()
        a, b = F.normalize(h[: BATCH // 2], dim=-1), F.normalize(h[BATCH // 2 :], dim=-1)
        loss = F.cross_entropy(a @ b.T / 0.1, torch.arange(BATCH // 2))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    out["seconds_per_step"] = round(sum(times[WARM:]) / (STEPS - WARM), 4)
    out["first_steps"] = [round(t, 3) for t in times[:WARM]]
    out["page_faults_per_step"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) // STEPS
    return out


def main() -> None:
    if len(sys.argv) == 3:
        print(json.dumps(child(sys.argv[1] == "1", sys.argv[2] == "1")), flush=True)
        return
    import torch

    cpuinfo = Path("/proc/cpuinfo").read_text()
    model_name = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line), "?")
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in cpuinfo.split()]
    print(json.dumps({"torch": torch.__version__, "cpu": model_name, "flags": flags}), flush=True)
    runs = [(first, keep) for keep in "01" for _ in range(ROUNDS) for first in "01"]
    if SMOKE:  # each branch of each setting once: a fresh process costs seconds of imports
        runs = [("1", "0"), ("0", "1")]
    for evaluate_first, keep in runs:
        subprocess.run([sys.executable, __file__, evaluate_first, keep], check=True)


if __name__ == "__main__":
    main()
