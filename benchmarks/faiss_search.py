"""Exact top-k search for QQP-sized retrieval: faiss (as the QQP task runs it) vs brute-force NumPy.

A synthetic corpus of 400k unit vectors of dimension 384 (the MiniLMs' size; QQP has ~300k unique
question2 texts) and a few thousand queries. The NumPy baseline is what one writes by hand: the
full query x corpus score matrix, then argpartition + argsort for the top k. The faiss path is
``benchharness.scoring.top_k.top_k``, as QQP runs it: an ``IndexFlatIP`` per block of 65,536 documents,
searched in query blocks, so memory holds one block of documents and one block of scores. Each runs
in its own subprocess so that its peak memory is its own; the script checks that both return the same
top-k ids.

    python benchmarks/faiss_search.py [--corpus 400000] [--queries 1000] [--dim 384] [--k 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import SMOKE

from benchharness.core.resources import peak_rss_mib


def data(n: int, q: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((n, dim), dtype=np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    # queries near corpus points, as duplicates are: a positive exists and ranks high
    queries = corpus[rng.integers(0, n, q)] + 0.5 * rng.standard_normal((q, dim), dtype=np.float32) / np.sqrt(dim)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return corpus, queries


def numpy_topk(corpus: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ corpus.T  # the full (queries x corpus) matrix
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def faiss_topk(corpus: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    from benchharness.scoring.top_k import top_k
    from benchharness.tasks.qqp import DOC_BLOCK

    return top_k(queries, (corpus[i : i + DOC_BLOCK] for i in range(0, len(corpus), DOC_BLOCK)), k)[1]


def worker(tool: str, n: int, q: int, dim: int, k: int, ids_file: Path) -> None:
    if tool == "faiss":
        import benchharness.tasks.qqp  # noqa: F401  (imports are not part of the search cost)
    corpus, queries = data(n, q, dim)
    base = peak_rss_mib()
    t0 = time.perf_counter()
    ids = (numpy_topk if tool == "numpy" else faiss_topk)(corpus, queries, k)
    seconds = time.perf_counter() - t0
    peak = peak_rss_mib()
    np.save(ids_file, ids[:, :10])
    print("RESULT " + json.dumps({"seconds": seconds, "peak_rss_mb": peak, "data_rss_mb": base}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=int, default=400_000)
    p.add_argument("--queries", type=int, default=1_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--ids", type=Path, help=argparse.SUPPRESS)  # where a worker leaves its top-10 ids
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        p.set_defaults(corpus=3000, queries=20, dim=16, k=5)
    a = p.parse_args()
    if a.worker:
        worker(a.worker, a.corpus, a.queries, a.dim, a.k, a.ids)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        return compare(a, Path(folder))


def compare(a: argparse.Namespace, folder: Path) -> int:
    """Each tool in a process of its own, its top-10 ids left in ``folder``; then the comparison."""
    out = {}
    for tool in ("faiss", "numpy"):
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                tool,
                "--corpus",
                str(a.corpus),
                "--queries",
                str(a.queries),
                "--dim",
                str(a.dim),
                "--k",
                str(a.k),
                "--ids",
                str(folder / f"{tool}.npy"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:  # a negative return code is a signal: -9 is the kernel's out-of-memory kill
            print(f"{tool} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            return 1
        out[tool] = json.loads(line[7:])
    same = float(np.mean(np.load(folder / "faiss.npy") == np.load(folder / "numpy.npy")))
    corpus_mb = a.corpus * a.dim * 4 / 2**20
    print(f"corpus {a.corpus} x {a.dim} float32 ({corpus_mb:.0f} MB), {a.queries} queries, top {a.k}")
    for tool, r in out.items():
        print(
            f"  {tool:6s} {r['seconds']:8.2f} s   peak RSS {r['peak_rss_mb']:8.0f} MB "
            f"(of which data {r['data_rss_mb']:.0f} MB; search adds {r['peak_rss_mb'] - r['data_rss_mb']:.0f} MB)"
        )
    print(
        f"  numpy/faiss time ratio {out['numpy']['seconds'] / out['faiss']['seconds']:.2f}x; "
        f"top-10 ids identical for {100 * same:.2f}% of positions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
