"""The product's own example end to end, cold, and where its time goes:

    benchharness run --encoders paser,consert --tasks sts

Each checkout given runs the command in a fresh process, with an empty runs folder, an empty
embedding cache and an empty results folder (so both recipes are trained and the STS suite is
encoded and scored for each), using that checkout's own virtual environment (``<checkout>/.venv``).
Giving the old commit's clone and the new one times both on the same machine in one run::

    python benchmarks/headline.py --checkout ../old --checkout . [--rate 25]

Wall time is the command's; peak RSS is the one its results record. The phases come from sampling the process with
py-spy (``pip install py-spy``; without it only the total is printed), which reads the stacks without
pausing the process (``--nonblocking``: pausing it 25 times a second made ConSERT's 150 steps in
``benchharness train consert`` take 59.5 s, against 56.8 s without py-spy and 57.1 s with
``--nonblocking``); every sample of the main
thread is put in the first phase whose function is on its stack, so the phases add up to the
wall time and no commit needs instrumenting. The seven scores of each recipe are compared with the
ones stored in that checkout's ``results/``.

``--precision bf16`` (a CPU with native bf16) times the same work with both recipes trained in bf16
against fp32, one after the other on the last checkout, without py-spy: ``benchharness train
<method> --precision bf16`` for each (a recipe of its own), then ``run`` of the two, against the
command itself; it prints both wall times and every score's difference (bf16 - fp32).

``--encoders simcse,defsent-plus`` runs the same command with other recipes (their estimates against
their training's wall time; ``results/benchmarks/headline_<names>.txt``).

``--floor`` adds the FLOP floor of the command's work (``floors.py``), computed in this run after
the timed ones, with the last checkout's code: each recipe's steps (as many as its run made) at the
mean floor of 8 of its batches (``train_throughput.py --floor --floor-samples 8``), its STS-B dev
evaluations (as many as its run made) and each trained encoder's encoding of the suite's sentences,
batched as the harness batches them. Model loading, tokenisation, scoring, the optimizer and every
element-wise op are left out: the floor is a lower bound, and wall / floor how far above it the
command runs.
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
from machine import SMOKE, data_root, header, report

#: the encoders and tasks of the command (smoke mode: glove-50d on STS-B, nothing trained)
ENCODERS = ("glove-50d",) if SMOKE else ("paser", "consert")
STS = ("STSBenchmark",) if SMOKE else ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")

#: (phase, a frame on the stack as py-spy writes it, "function (file"), first match wins; the
#: process runs in the checkout, so the project's files are named relative to it
PHASES: list[tuple[str, str]] = [
    ("dev evaluation", "(benchharness/training/dev_eval.py"),
    ("checkpoints and saving", "save_checkpoint (benchharness/training/resume.py"),
    ("checkpoints and saving", "save_encoder (benchharness/training/outputs.py"),
    ("checkpoints and saving", "finish (benchharness/training/loop.py"),
    ("training steps", "run_loop (benchharness/training/loop.py"),
    ("training setup (data, model)", "(benchharness/training/harness.py"),
    ("training setup (data, model)", "(benchharness/training/methods/"),
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
            "--nonblocking",  # sampling without pausing the process (see the docstring)
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
    out["work"] = work_done(workdir / "runs")
    return out


def run_precisions(checkout: Path, workdir: Path) -> dict[str, object]:
    """The headline's work in fp32 (the command) and in bf16 (each recipe trained with ``--precision
    bf16``, then ``run`` of them), wall times and the scores of every task (see the docstring)."""
    venv = checkout / ".venv" / "bin"
    measured: dict[str, object] = {}
    scores: dict[str, dict[str, float]] = {}
    for precision in ("fp32", "bf16"):
        folder = workdir / precision
        env = {**os.environ, "BENCHHARNESS_RUNS": str(folder / "runs"), "TQDM_DISABLE": "1"}
        dirs = ["--cache-dir", str(folder / "cache"), "--results-dir", str(folder / "results")]
        encoders = list(ENCODERS)
        start = time.perf_counter()
        if precision == "bf16":
            for i, name in enumerate(ENCODERS):
                trained = subprocess.run(
                    [str(venv / "benchharness"), "train", name, "--precision", "bf16"],
                    cwd=checkout,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                encoders[i] = re.findall(r"--encoders (\S+)", trained)[-1]
        subprocess.run(
            [str(venv / "benchharness"), "run", "--encoders", ",".join(encoders), "--tasks", ",".join(STS), *dirs],
            cwd=checkout,
            env=env,
            capture_output=True,
            check=True,
        )
        measured[f"{precision}_wall_seconds"] = round(time.perf_counter() - start, 1)
        for result in (folder / "results").glob(f"*/{STS[0]}.json"):  # one folder per encoder
            method = json.loads(result.read_text())["encoder_metadata"]["training"]["method"]
            scores[f"{precision} {method}"] = {
                task: json.loads((result.parent / f"{task}.json").read_text())["main_score"] for task in STS
            }
    measured["bf16_minus_fp32"] = {
        name: {task: round(scores[f"bf16 {name}"][task] - scores[f"fp32 {name}"][task], 4) for task in STS}
        for name in ENCODERS
    }
    return measured


def work_done(runs: Path) -> dict[str, dict[str, object]]:
    """What each run did, for the floor: its base, steps, dev evaluations, and the length and batch
    size its evaluations encode with."""
    found = {}
    for manifest in runs.rglob("manifest.json"):
        record = json.loads(manifest.read_text())
        hyper = record.get("hyperparameters", {})
        found[record["method"]] = {
            "base": record["base_model"],
            "steps": record["training"]["steps"],
            "dev_evaluations": len(record.get("dev_curve") or []),
            "eval_max_length": record["encoder"]["max_length"],
            "eval_batch_size": hyper.get("eval_batch_size"),
        }
    return found


def work_floor(checkout: Path, work: dict[str, dict[str, object]]) -> dict[str, object]:
    """The floor of the headline's work (see the module docstring), in seconds, by part."""
    import torch
    from floors import encoding_floor
    from transformers import AutoModel, AutoTokenizer

    from benchharness import tasks
    from benchharness.encoders import hub
    from benchharness.encoders.inference import TOKEN_BUDGET, TOKENS_PER_SENTENCE
    from benchharness.training.dev_eval import DEV_TASK

    python = str(checkout / ".venv" / "bin" / "python")
    parts: dict[str, float] = {}
    data = data_root()
    suite: dict[str, None] = {}
    for name in STS:
        task = tasks.get(name)
        task.load(data)
        suite.update(dict.fromkeys(task.sentences()))
    dev = tasks.get(DEV_TASK)
    dev.load(data)
    dev_sentences = list(dict.fromkeys(dev.sentences()))
    torch.set_num_threads(os.cpu_count() or 1)
    for name in ENCODERS:
        done = work[name]
        command = [python, "benchmarks/train_throughput.py", "--recipe", name, "--steps", "1", "--floor"]
        line = subprocess.run(
            [*command, "--floor-samples", "8"], capture_output=True, text=True, cwd=checkout, check=True
        ).stdout.strip()
        step = json.loads(line.splitlines()[-1])["floor_seconds"]
        parts[f"{name} steps"] = step * int(done["steps"])  # type: ignore[call-overload]
        path = hub.resolve(str(done["base"])).path
        model, tokenizer = AutoModel.from_pretrained(str(path)), AutoTokenizer.from_pretrained(str(path))
        length = int(done["eval_max_length"])  # type: ignore[call-overload]
        budget = int(done["eval_batch_size"] or 64) * TOKENS_PER_SENTENCE  # type: ignore[call-overload]
        per_dev = encoding_floor(model, tokenizer, dev_sentences, length, budget).seconds
        parts[f"{name} dev evaluations"] = per_dev * int(done["dev_evaluations"])  # type: ignore[call-overload]
        suite_floor = encoding_floor(model, tokenizer, list(suite), length, TOKEN_BUDGET)
        parts[f"{name} encoding the suite"] = suite_floor.seconds
    return {"floor_seconds": round(sum(parts.values()), 1), "floor_parts": {k: round(v, 1) for k, v in parts.items()}}


def training_seconds(raw: Path, rate: int) -> dict[str, float]:
    """Wall time of each recipe's training as the user waits for it (data, model, steps, dev
    evaluations, saving): the main thread's samples inside that method's ``train``."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit() or "MainThread" not in stack:
            continue
        found = re.search(r"train \(benchharness/training/methods/(\w+)/method\.py", stack)
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
    parser.add_argument(
        "--encoders",
        help="other recipes than the headline's paser,consert, comma-separated: the same measurements "
        "(each training's printed estimate against its wall time, scores against the stored ones), "
        "written to results/benchmarks/headline_<names>.txt",
    )
    parser.add_argument("--rate", type=int, default=25, help="py-spy samples per second")
    parser.add_argument(
        "--precision",
        choices=("bf16",),
        help="time the work in bf16 against fp32 on the last checkout instead (see the docstring)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also compute the FLOP floor of the command's work, after the timed runs (see the docstring)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep each run's folders (runs, cache, results, log, profile) "
        "under KEEP/<commit> instead of a temporary folder",
    )
    args = parser.parse_args()
    global ENCODERS
    name = "headline"
    if args.encoders:
        ENCODERS = tuple(e.strip() for e in args.encoders.split(",") if e.strip())
        name = "headline_" + "_".join(ENCODERS)
    if SMOKE and not args.checkout:  # a tiny input: the code path, not a measurement (benchmarks/machine.py)
        args.checkout = [Path(__file__).resolve().parents[1]]
    lines = [header()]
    if args.precision:
        with tempfile.TemporaryDirectory() as tmp:
            m = {"commit": commit(args.checkout[-1]), **run_precisions(args.checkout[-1].resolve(), Path(tmp))}
        lines.append(json.dumps(m))
        report("headline_bf16", lines)
        return
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
    if args.floor and not SMOKE:
        floor = work_floor(args.checkout[-1].resolve(), measured[-1]["work"])  # type: ignore[arg-type]
        lines.append(json.dumps(floor))
        for m in measured:
            lines.append(
                f"# {m['commit']}: {m['wall_seconds']} s = {m['wall_seconds'] / floor['floor_seconds']:.2f}x "  # type: ignore[operator]
                f"the floor of its work ({floor['floor_seconds']} s)"
            )
        print("\n".join(lines[-len(measured) - 1 :]), flush=True)
    if len(measured) == 2:
        old, new = measured
        lines.append(
            f"# {new['commit']} against {old['commit']}: {new['wall_seconds']} s against "
            f"{old['wall_seconds']} s ({old['wall_seconds'] / new['wall_seconds']:.2f}x faster)"
        )
    report(name, lines)


if __name__ == "__main__":
    main()
