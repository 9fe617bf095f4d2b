"""Ray on one machine: a sweep against the sequential run, and sharded encoding against one process.

1. Sweep: ``run --encoders glove-50d,minilm-l3,minilm-l6 --tasks sts`` without cache, sequential
   (``--executor local``) and as Ray tasks (``--executor ray``, a local Ray started by the run and
   counted in its time). Every stored result must be identical but for its date and timings.
2. Sharded encoding: the STS suite's sentences encoded by ``--encoders`` (default minilm-l6) into a
   fresh cache, by one process and by ``--encode-actors 2``. Each actor has one CPU slot and so one
   torch thread; a transformer's CPU vectors move in their last bits with the thread count, so the
   cache is compared bit for bit with a one-process run at one thread (``OMP_NUM_THREADS=1``) and,
   as a difference, with the default two-thread run.

Each run is its own process. With 2 cores the speed-up is capped at 2x, less Ray's start-up.

    python benchmarks/ray_scaling.py [--sharded-encoder minilm-l6]

Writes ``results/benchmarks/ray_scaling.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import SMOKE, cli_command, header, report  # noqa: E402

from benchharness.core.results import ResultStore  # noqa: E402
from benchharness.evaluation.cache import EmbeddingCache  # noqa: E402

#: the sweep's encoders and the tasks of both parts (smoke mode: glove-50d on SICK-R's 500 trial pairs)
SWEEP = "glove-50d" if SMOKE else "glove-50d,minilm-l3,minilm-l6"
TASKS = "SICKRelatedness-trial" if SMOKE else "sts"
VOLATILE = ("date", "timings")


def cli(*args: str, env: dict[str, str] | None = None) -> float:
    """Seconds a ``benchharness`` command takes, run from the project (its data and hub cache)."""
    t0 = time.perf_counter()
    done = subprocess.run(
        cli_command(*args, "--quiet"),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"benchharness {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds


def stored(folder: Path) -> dict:
    store = ResultStore(folder)
    out = {}
    for result in store:
        record = {k: v for k, v in result.to_dict().items() if k not in VOLATILE}
        record["items"] = {k: v.tolist() for k, v in store.load_items(result).items.items()}
        out[result.encoder, result.task] = record
    return out


def cache_rows(folder: Path) -> tuple[list[bytes], np.ndarray]:
    (identity,) = [p.name for p in folder.iterdir() if p.is_dir()]
    keys, rows = [], []
    EmbeddingCache(folder).lookup(identity, lambda k, r: (keys.extend(k), rows.append(r.copy())))
    return keys, np.concatenate(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sharded-encoder", default="minilm-l6")
    parser.add_argument("--sweep-only", action="store_true", help="measure the sweep alone (nothing is written)")
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(sharded_encoder="glove-50d")
    args = parser.parse_args()
    lines = [header()]
    with tempfile.TemporaryDirectory(prefix="ray-scaling-") as scratch:
        work = Path(scratch)
        seq = cli("run", "--encoders", SWEEP, "--tasks", TASKS, "--results-dir", str(work / "sequential"), "--no-cache")
        ray = cli(
            "run",
            "--encoders",
            SWEEP,
            "--tasks",
            TASKS,
            "--results-dir",
            str(work / "swept"),
            "--no-cache",
            "--executor",
            "ray",
        )
        a, b = stored(work / "sequential"), stored(work / "swept")
        same = lambda x, y: json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)
        differ = sorted({f"{k[0]}/{k[1]}: {f}" for k in a for f in a[k] if not same(a[k][f], b.get(k, {}).get(f))})
        lines.append(
            f"sweep {SWEEP} x {TASKS} ({len(a)} results): sequential {seq:.1f} s, ray {ray:.1f} s, "
            f"speed-up {seq / ray:.2f}x; results identical but for date and timings: "
            f"{not differ and len(a) == len(b) > 0}{'; differing: ' + ', '.join(differ) if differ else ''}"
        )
        print(lines[-1], flush=True)
        if args.sweep_only:
            return
        enc = args.sharded_encoder
        sts = ("run", "--encoders", enc, "--tasks", TASKS)
        one = cli(*sts, "--results-dir", str(work / "r1"), "--cache-dir", str(work / "one"))
        one_thread = cli(
            *sts,
            "--results-dir",
            str(work / "r2"),
            "--cache-dir",
            str(work / "one-thread"),
            env={"OMP_NUM_THREADS": "1"},
        )
        two = cli(*sts, "--results-dir", str(work / "r3"), "--cache-dir", str(work / "actors"), "--encode-actors", "2")
        k1, v1 = cache_rows(work / "one")
        kt, vt = cache_rows(work / "one-thread")
        k2, v2 = cache_rows(work / "actors")
        lines.append(
            f"sharded encoding of {TASKS} by {enc} ({len(k2):,} sentences, fresh cache, evaluation included): "
            f"one process {one:.1f} s (2 threads), one process at 1 thread {one_thread:.1f} s, 2 actors "
            f"{two:.1f} s; speed-up over one process {one / two:.2f}x"
        )
        lines.append(
            f"  cache of 2 actors vs one process at 1 thread: same keys in the same order {k2 == kt}, "
            f"bit-identical {k2 == kt and np.array_equal(v2, vt)}"
        )
        lines.append(
            f"  vs one process at 2 threads: same keys {k2 == k1}, max |difference| "
            f"{np.abs(v2 - v1).max() if k2 == k1 else float('nan'):.3g}"
        )
        scores = [
            [json.loads(p.read_text())["main_score"] for p in sorted((work / r).glob("*/*.json"))] for r in ("r2", "r3")
        ]
        lines.append(f"  scores of the 2-actor run equal the 1-thread run's: {scores[0] == scores[1]}")
    report("ray_scaling", lines)


if __name__ == "__main__":
    main()
