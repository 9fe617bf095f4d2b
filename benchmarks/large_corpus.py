"""Memory bounded by a chunk, not by the corpus: QQP retrieval over a synthetic corpus of millions of
sentences, encoded by glove-50d through the embedding cache.

A QQP-format file (``quora_duplicate_questions.tsv``) is written to a scratch data root: every row
a distinct question2 of 8 to 15 GloVe words, and one row in ``--dup-every`` a duplicate whose
question1 is half its question2's words, shuffled, plus three random words (the queries). Each configuration
runs ``benchharness run --encoders glove-50d --tasks QQP`` in its own process (cold cache, then
warm), and reports the process's peak resident memory (``ru_maxrss``, in the result's timings) and
the scores:

* the full corpus with the vectors on disk (``--embedding-memory 64``);
* a subset both can hold, in memory (the default 4096 MiB) and on disk: the scores must be equal.

    python benchmarks/large_corpus.py [--rows 2000000] [--subset 500000] [--dup-every 400]

Writes ``results/benchmarks/large_corpus.txt``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import SMOKE, cli_command, data_root, header, report  # noqa: E402


def vocabulary(data: Path, size: int = 20000) -> list[str]:
    words = []
    with gzip.open(data / "glove" / "glove.6B.50d.subset.txt.gz", "rt", encoding="utf8") as fh:
        for line in fh:
            word = line.split(" ", 1)[0]
            if word.isalpha():
                words.append(word)
            if len(words) == size:
                break
    return words


def synthetic_pairs(rows: int, dup_every: int, words: list[str]) -> Iterator[tuple[str, str, int]]:
    """(question1, question2, is_duplicate) rows: every question2 distinct, of 8 to 15 words; one row
    in ``dup_every`` a duplicate whose question1 is half its question2's words, shuffled, plus three
    random words (not always found first); the others an unrelated question1."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(8, 16, size=rows)
    picks = rng.integers(0, len(words), size=int(lengths.sum()))
    at = 0
    for i in range(rows):
        q2 = [words[j] for j in picks[at : at + lengths[i]]]
        at += lengths[i]
        q2[0] = f"{q2[0]}{i}"  # every question2 distinct
        if i % dup_every == 0:
            q1 = [q2[j] for j in rng.permutation(len(q2))[: len(q2) // 2]]
            q1 += [words[j] for j in rng.integers(0, len(words), size=3)]
            yield " ".join(q1) + "?", " ".join(q2) + "?", 1
        else:
            yield f"{words[(i * 7) % len(words)]} unrelated {i}?", " ".join(q2) + "?", 0


def write_qqp(folder: Path, rows: int, dup_every: int, words: list[str]) -> None:
    (folder / "qqp").mkdir(parents=True)
    with open(folder / "qqp" / "quora_duplicate_questions.tsv", "w", encoding="utf8") as fh:
        fh.write("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n")
        for i, (q1, q2, dup) in enumerate(synthetic_pairs(rows, dup_every, words)):
            fh.write(f"{i}\t{2 * i}\t{2 * i + 1}\t{q1}\t{q2}\t{dup}\n")


def run(data: Path, work: Path, label: str, memory_mib: float | None) -> dict:
    results, cache = work / f"results-{label}", work / f"cache-{label}"
    command = cli_command("run", "--encoders", "glove-50d", "--tasks", "QQP", "--data-dir", str(data), "--no-verify")
    command += ["--results-dir", str(results), "--cache-dir", str(cache), "--quiet", "--overwrite", "always"]
    if memory_mib is not None:
        command += ["--embedding-memory", str(memory_mib)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    glove = data_root().root / "glove"
    (data / "glove").exists() or (data / "glove").symlink_to(glove)
    out = {}
    for phase in ("cold", "warm"):
        t0 = time.perf_counter()
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{label} {phase} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        result = json.loads(next(results.glob("*/QQP.json")).read_text())
        out[phase] = {
            "seconds": round(seconds, 1),
            "peak_rss_mb": result["timings"]["peak_rss_mb"],
            "map": result["metrics"]["map"],
            "mrr@10": result["metrics"]["mrr@10"],
            "n_corpus": result["metrics"]["n_corpus"],
            "n_queries": result["metrics"]["n_queries"],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--subset", type=int, default=500_000)
    parser.add_argument("--dup-every", type=int, default=400)
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(rows=2000, subset=500, dup_every=50)
    args = parser.parse_args()
    lines = [header()]
    words = vocabulary(data_root().root)
    with tempfile.TemporaryDirectory(prefix="large-corpus-") as scratch:
        work = Path(scratch)
        runs = {}
        for label, rows, memory in (
            ("subset-memory", args.subset, None),
            ("subset-disk", args.subset, 64),
            ("full-disk", args.rows, 64),
        ):
            data = work / f"data-{rows}"
            if not data.exists():
                write_qqp(data, rows, args.dup_every, words)
            runs[label] = run(data, work, label, memory)
            for phase, r in runs[label].items():
                lines.append(
                    f"{label:14s} {phase}: {r['n_corpus']:>9,} documents, {r['n_queries']:>6,} queries, "
                    f"MAP@100 {r['map']:.4f}, MRR@10 {r['mrr@10']:.4f}, peak RSS {r['peak_rss_mb']:,.0f} MiB, "
                    f"{r['seconds']} s"
                )
            print(lines[-1], flush=True)
    same = all(
        runs["subset-memory"][p][m] == runs["subset-disk"][p][m] for p in ("cold", "warm") for m in ("map", "mrr@10")
    )
    lines.append(f"subset scores in memory and on disk identical: {same}")
    report("large_corpus", lines)


if __name__ == "__main__":
    main()
