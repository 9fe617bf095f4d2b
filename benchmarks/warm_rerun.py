"""How long does a warm rerun take, end to end? (target: at most 2 s)

A warm rerun recomputes every score of an encoder on a task group when the embedding cache
already holds every sentence: ``benchharness run --encoders E --tasks sts --overwrite always``
(``--overwrite always`` so that stored results are not simply reused). Each run is a fresh
``python -m benchharness.cli`` process, timed from outside (interpreter start to exit), with its
results written to a scratch folder (never the checkout's ``results/``):

1. one fill run (``cold``): encodes what the cache lacks, which is nothing when the cache is
   already full (then it is a warm run too), and remembers the weight digests;
2. ``--repeats`` warm runs, of which the best and the median are reported; each is checked to
   have encoded nothing (``sentences_not_from_cache`` is 0 in every result it wrote), and the
   heavy libraries it imported are listed (none is expected).

A warm run recomputes every score, but its bootstrap intervals come from the results it replaces
when those were computed by the same clean commit from identical per-item outputs
(``confidence_record``); from a checkout with uncommitted code changes they are bootstrapped
afresh (~0.7 s more for the STS suite), as they are with ``--empty-results`` (nothing stored to
replace). The report says which.

The embedding cache is the project's (``benchharness.toml``), or ``--cache-dir``; a minilm-l6
fill of the STS suite takes a few minutes of CPU. Bytecode is compiled first (``compileall``), so
that an environment with ``PYTHONDONTWRITEBYTECODE`` does not time compilation. On a shared
machine the times are upper bounds; take the final figure on an idle one.

    PYTHONPATH=. python benchmarks/warm_rerun.py [--encoders minilm-l6,glove-50d] [--tasks sts] [--repeats 3]

(from the checkout root; PYTHONPATH puts this checkout first)
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import SMOKE

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "sentence_transformers", "scipy", "sklearn")

#: the CLI, then the top-level modules it left loaded (one JSON line on stderr)
RUN = """
import json, sys
from benchharness.cli import main
try:
    code = main(sys.argv[1:])
finally:
    print(json.dumps({"loaded": sorted({m.split(".")[0] for m in sys.modules})}), file=sys.stderr)
sys.exit(code)
"""


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", RUN, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"benchharness {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return seconds, sorted(set(json.loads(out.stderr.strip().splitlines()[-1])["loaded"]) & set(HEAVY))


def encoded(results: Path) -> int:
    """Sentences the last run encoded (not served by the cache): every result of one encoding pass
    records the pass's count, so the largest is the run's."""
    return max(
        (
            int(json.loads(p.read_text()).get("timings", {}).get("sentences_not_from_cache", 0))
            for p in results.rglob("*.json")
        ),
        default=0,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoders", default="minilm-l6,glove-50d", help="comma list; each is timed on its own")
    parser.add_argument("--tasks", default="sts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", help="embedding cache (default: the project's)")
    parser.add_argument(
        "--empty-results",
        action="store_true",
        help="empty the results folder before each warm run: nothing to replace, so every "
        "interval is bootstrapped (the embedding cache stays full)",
    )
    if SMOKE:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        parser.set_defaults(encoders="glove-50d", tasks="SICKRelatedness-trial", repeats=1)
    args = parser.parse_args()

    compileall.compile_dir(str(ROOT / "benchharness"), quiet=1)
    compileall.compile_dir(str(ROOT / "encoders"), quiet=1)
    compileall.compile_dir(str(ROOT / "tasks"), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if SMOKE and not args.cache_dir:  # never fill the project's cache with a smoke run
        args.cache_dir = tempfile.mkdtemp(prefix="benchmark-smoke-cache-")
    print(
        f"warm rerun, tasks {args.tasks}, best and median of {args.repeats} (python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f})"
    )
    for encoder in [e.strip() for e in args.encoders.split(",") if e.strip()]:
        with tempfile.TemporaryDirectory(prefix="benchharness-warm-") as scratch:
            cli = [
                "run",
                "--encoders",
                encoder,
                "--tasks",
                args.tasks,
                "--overwrite",
                "always",
                "--quiet",
                "--results-dir",
                scratch,
                *(["--cache-dir", args.cache_dir] if args.cache_dir else []),
            ]
            cold, _ = run_once(cli, env)
            filled = encoded(Path(scratch))
            times, heavy = [], set()
            for _ in range(args.repeats):
                if args.empty_results:
                    for entry in Path(scratch).iterdir():
                        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
                seconds, loaded = run_once(cli, env)
                if encoded(Path(scratch)):
                    raise SystemExit(f"{encoder}: a warm run encoded sentences: the cache is not full")
                times.append(seconds)
                heavy.update(loaded)
            commits = {json.loads(p.read_text())["versions"].get("git_commit") for p in Path(scratch).rglob("*.json")}
        intervals = (
            "bootstrapped (no stored results to replace)"
            if args.empty_results
            else "bootstrapped afresh (checkout has uncommitted code)"
            if any(str(c).endswith("-dirty") for c in commits)
            else "reused from the replaced results"
        )
        print(
            f"{encoder:>12}: warm best {min(times):.2f} s, median {statistics.median(times):.2f} s "
            f"(fill run {cold:.2f} s, {filled:,} sentences encoded); "
            f"heavy imports: {', '.join(sorted(heavy)) or 'none'}; "
            f"intervals {intervals}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
