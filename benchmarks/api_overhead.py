"""The Python API against the command line: the same score, and what the API costs on top.

For each kind of model ``benchharness.evaluate`` accepts, STS-B (test) of all-MiniLM-L6-v2 is
computed in a fresh process, cold (no embedding cache, nothing stored), and compared with
``benchharness run --encoders minilm-l6 --tasks STSBenchmark --no-cache`` in a fresh process too:

- ``name``: ``evaluate("minilm-l6", ...)``;
- ``encoder``: ``evaluate(as_encoder("minilm-l6"), ...)``;
- ``sentence-transformer``: a ``SentenceTransformer`` object;
- ``transformers``: ``AutoModel`` + ``AutoTokenizer`` with ``pooling="avg"`` (the model's own mean
  pooling; its normalisation does not change cosines);
- ``callable``: ``lambda batch: st.encode(batch)`` with an ``identity``.

Each process times the evaluation itself (model load included, interpreter start excluded), and
the CLI's wall time from outside is reported beside its own in-process figure. Run from the
checkout root on an idle machine:

    python benchmarks/api_overhead.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from machine import SMOKE

KINDS = ("cli", "name", "encoder", "sentence-transformer", "transformers", "callable")
#: the encoder name and hub id measured, and the task (smoke mode: the smallest MiniLM, 500 pairs)
NAME, MODEL, TASK = (
    ("minilm-l3", "sentence-transformers/paraphrase-MiniLM-L3-v2", "SICKRelatedness-trial")
    if SMOKE
    else ("minilm-l6", "sentence-transformers/all-MiniLM-L6-v2", "STSBenchmark")
)

#: evaluates each kind of its comma list in turn, printing one JSON line per kind
#: (argv: kinds, results folder, encoder name, task, hub id)
CHILD = r"""
import json, sys, time
name, task, hub_id = sys.argv[3:6]
for kind in sys.argv[1].split(","):
    out = sys.argv[2]
    t0 = time.perf_counter()
    if kind == "cli":
        from benchharness.cli import main
        main(["run", "--encoders", name, "--tasks", task, "--no-cache", "--quiet", "--results-dir", out])
        score = json.load(open(out + "/" + name + "/" + task + ".json"))["main_score"]
    else:
        import benchharness
        from huggingface_hub import snapshot_download
        path = snapshot_download(hub_id, local_files_only=True)
        if kind == "name":
            model, options = name, {}
        elif kind == "encoder":
            model, options = benchharness.as_encoder(name), {}
        elif kind in ("sentence-transformer", "callable"):
            from sentence_transformers import SentenceTransformer
            st = SentenceTransformer(path, device="cpu")
            if kind == "sentence-transformer":
                model, options = st, {}
            else:
                model, options = (lambda b: st.encode(b)), {"identity": "l6"}
        else:
            from transformers import AutoModel, AutoTokenizer
            model = AutoModel.from_pretrained(path)
            options = {"tokenizer": AutoTokenizer.from_pretrained(path), "pooling": "avg"}
        score = benchharness.evaluate(model, task, **options).results[0].main_score
    print(json.dumps({"score": score, "seconds": time.perf_counter() - t0}))
"""


def once(kinds: list[str]) -> dict[str, dict]:
    """Each kind's score and in-process seconds, from one fresh process that evaluates ``kinds`` in
    turn, with the process's wall time (interpreter start included)."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, ",".join(kinds), out, NAME, TASK, MODEL],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TQDM_DISABLE": "1"},
        )
        wall = time.perf_counter() - t0
    lines = proc.stdout.strip().splitlines()[-len(kinds) :]
    return {kind: {**json.loads(line), "wall": wall} for kind, line in zip(kinds, lines)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(repeats=1)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    rows = {}
    # each kind cold in a process of its own; smoke mode runs them all in one process (seconds, not minutes)
    groups = [list(KINDS)] if SMOKE else [[kind] for kind in KINDS]
    for _ in range(args.repeats):
        for group in groups:
            for kind, row in once(group).items():
                rows.setdefault(kind, []).append(row)
    cli = min(r["seconds"] for r in rows["cli"])
    print(f"{'model kind':22s} {'STS-B':>9s} {'best s':>8s} {'median s':>9s} {'wall s':>7s} {'vs cli':>7s}")
    for kind in KINDS:
        best = min(r["seconds"] for r in rows[kind])
        median = statistics.median(r["seconds"] for r in rows[kind])
        wall = min(r["wall"] for r in rows[kind])
        print(f"{kind:22s} {rows[kind][0]['score']:9.4f} {best:8.2f} {median:9.2f} {wall:7.2f} {best / cli:7.2f}x")


if __name__ == "__main__":
    main()
