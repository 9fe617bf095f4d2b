"""The product's own example end to end, cold, and where its time goes:

    benchharness run --encoders paser,consert --tasks sts

Each checkout given runs the command in a fresh process, with an empty runs folder, an empty
embedding cache and an empty results folder (so both recipes are trained and the STS suite is
encoded and scored for each), using that checkout's own virtual environment (``<checkout>/.venv``).
Giving the old commit's clone and the new one times both on the same machine in one run::

    python benchmarks/headline.py --checkout ../old --checkout . [--rate 25]

Wall time is the command's; peak RSS is the one its results record. The phases come from sampling the process with
py-spy (``pip install py-spy``; without it only the total is printed): every sample of the main
thread is put in the first phase whose function is on its stack, so the phases add up to the
wall time and no commit needs instrumenting. The seven scores of each recipe are compared with the
ones stored in that checkout's ``results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import SMOKE, header, report

#: the encoders and tasks of the command (smoke mode: glove-50d on STS-B, nothing trained)
ENCODERS = ("glove-50d",) if SMOKE else ("paser", "consert")
STS = ("STSBenchmark",) if SMOKE else ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")

#: (phase, a frame on the stack as py-spy writes it, "function (file"), first match wins; the
#: process runs in the checkout, so the project's files are named relative to it
PHASES: list[tuple[str, str]] = [
    ("dev evaluation", "(benchharness/training/dev_eval.py"),
    ("checkpoints and saving", "save_checkpoint (encoders/methods/resume.py"),
    ("checkpoints and saving", "save_encoder (encoders/methods/resume.py"),
    ("checkpoints and saving", "finish (encoders/methods/loop.py"),
    ("training steps", "train (encoders/methods/loop.py"),
    ("training setup (data, model)", "main (encoders/methods/"),
    ("final encoding", "(encoders/inference.py"),
    ("imports", "_find_and_load ("),
]
OTHER = "other (model loading, tasks, scoring, results)"


def phase_of(stack: str) -> str:
    for phase, frame in PHASES:
        if frame in stack:
            return phase
    return OTHER


def phases(raw: Path, rate: int) -> dict[str, float]:
    """Seconds per phase from py-spy's raw output (``--threads``: a frame names the thread); only
    the main thread of the Python process counts."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit() or "thread (" not in stack:
            continue
        thread = stack[stack.index("thread (") :].split(";", 1)[0]
        if "MainThread" in thread:
            counts[phase_of(stack)] += int(n)
    return {k: round(v / rate, 1) for k, v in counts.most_common()}


def commit(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()


def run_headline(checkout: Path, rate: int, workdir: Path) -> dict[str, object]:
    venv = checkout / ".venv" / "bin"
    # no progress bars (TQDM_DISABLE), but the messages, which carry the training estimates (``--quiet`` hides
    # them since messages became log records)
    env = {**os.environ, "BENCHHARNESS_RUNS": str(workdir / "runs"), "TQDM_DISABLE": "1"}
    command = [
        str(venv / "benchharness"),
        "run",
        "--encoders",
        ",".join(ENCODERS),
        "--tasks",
        ",".join(STS),
        "--cache-dir",
        str(workdir / "cache"),
        "--results-dir",
        str(workdir / "results"),
    ]
    spy = shutil.which("py-spy", path=str(venv)) or shutil.which("py-spy")
    raw = workdir / "profile.txt"
    if spy:  # py-spy starts and samples the command (its main thread; see ``phases``)
        command = [
            spy,
            "record",
            "--idle",
            "--threads",
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--output",
            str(raw),
            "--",
            *command,
        ]
    log = workdir / "log.txt"
    start = time.perf_counter()
    with log.open("w") as fh:
        status = subprocess.run(command, cwd=checkout, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(
            f"{checkout}: the headline command failed ({status}); see {log}:\n"
            + "\n".join(log.read_text().splitlines()[-15:])
        )
    out: dict[str, object] = {
        "checkout": checkout.name,
        "commit": commit(checkout),
        "wall_seconds": round(wall, 1),
        "peak_rss_mib": peak_rss(workdir / "results"),
    }
    if spy:
        out["phases"] = phases(raw, rate)
        out["training_seconds"] = training_seconds(raw, rate)
    out["scores"] = compare_scores(checkout, workdir / "results")
    out["estimates"] = {
        name: seconds(text)
        for name, text in re.findall(r"training (\S+) .*?: \d+ steps, about ([^(]+?) \(", log.read_text())
    }
    out["train_seconds"] = train_seconds(workdir / "runs")
    return out


def training_seconds(raw: Path, rate: int) -> dict[str, float]:
    """Wall time of each recipe's training as the user waits for it (data, model, steps, dev
    evaluations, saving): the main thread's samples inside that method's command."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit() or "MainThread" not in stack:
            continue
        found = re.search(r"main \(encoders/methods/(\w+)/command\.py", stack)
        if found:
            counts[found.group(1).replace("_", "-")] += int(n)
    return {k: round(v / rate, 1) for k, v in counts.items()}


def seconds(text: str) -> float:
    """The printed duration ("80 s", "2 min 20 s", "3 min", "1.5 h") in seconds."""
    total = 0.0
    for value, unit in re.findall(r"([\d.]+) (s|min|h)\b", text):
        total += float(value) * {"s": 1, "min": 60, "h": 3600}[unit]
    return total


def peak_rss(results: Path) -> float:
    """The process's peak RSS as its results record it (each result's ``timings.peak_rss_mb`` is the
    process maximum when it was written: the last written holds the run's peak)."""
    return max(json.loads(f.read_text())["timings"]["peak_rss_mb"] for f in results.glob("*/*.json"))


def train_seconds(runs: Path) -> dict[str, float]:
    """The optimizer steps' own time of each run, from its manifest."""
    found = {}
    for manifest in runs.rglob("manifest.json"):
        record = json.loads(manifest.read_text())
        training = record.get("training") or {}
        seconds = training.get("train_seconds", record.get("train_seconds"))
        found[record.get("method", manifest.parent.name)] = seconds
    return found


def compare_scores(checkout: Path, results: Path) -> dict[str, float]:
    """Largest |new - stored| main score of each recipe over the STS suite."""
    diffs = {}
    for name in ENCODERS:
        worst = 0.0
        for task in STS:
            new = json.loads((results / name / f"{task}.json").read_text())["main_score"]
            stored = json.loads((checkout / "results" / name / f"{task}.json").read_text())["main_score"]
            worst = max(worst, abs(new - stored))
        diffs[name] = round(worst, 4)
    return diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkout",
        action="append",
        type=Path,
        required=not SMOKE,
        help="a clone with its own .venv (repeat: old commit first, then the new one)",
    )
    parser.add_argument("--rate", type=int, default=25, help="py-spy samples per second")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep each run's folders (runs, cache, results, log, profile) "
        "under KEEP/<commit> instead of a temporary folder",
    )
    args = parser.parse_args()
    if SMOKE and not args.checkout:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        args.checkout = [Path(__file__).resolve().parents[1]]
    lines = [header()]
    measured = []
    for checkout in args.checkout:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            if args.keep:
                workdir = args.keep.resolve() / commit(checkout)
                shutil.rmtree(workdir, ignore_errors=True)
                workdir.mkdir(parents=True)
            m = run_headline(checkout.resolve(), args.rate, workdir)
        measured.append(m)
        lines.append(json.dumps(m))
        print(lines[-1], flush=True)
    if len(measured) == 2:
        old, new = measured
        lines.append(
            f"# {new['commit']} against {old['commit']}: {new['wall_seconds']} s against "
            f"{old['wall_seconds']} s ({old['wall_seconds'] / new['wall_seconds']:.2f}x faster)"
        )
    report("headline", lines)


if __name__ == "__main__":
    main()
