"""Training as a library, measured: ``benchharness.train`` against ``benchharness train`` on the same
settings, what a call leaves behind, on-demand training on another data root, and a plugin method.

1. **Python against the command line.** In a fresh interpreter, in a folder with no
   ``benchharness.toml``: ``m = benchharness.train("simcse", sentences=<the first N STS-B train
   sentences>, max_steps=S, device="cpu", seed=1)``, then ``benchharness.evaluate(m,
   "STSBenchmark-dev")``; and ``benchharness train simcse --data <those sentences as a file>
   --max-steps S --device cpu --seed 1 --out <folder>``, then ``benchharness run --encoders <folder>
   --tasks STSBenchmark-dev``. Both weights hashes (sha256 over the encoder's tensors) and both scores.
2. **What the call leaves behind.** The files under the working folder, the temporary folder, the
   user cache and the runs folder, ``os.environ`` and torch's threads, before and after ``train()``.
   The interpreter gets a temporary folder and cache of its own (``TMPDIR``, ``XDG_CACHE_HOME``), so
   nothing else running on the machine shows up. Importing ``torch._dynamo`` (sentence-transformers
   does) creates ``<tmp>/torchinductor_<user>``: torch's doing, reported on a line of its own.
3. **On-demand training on another data root.** ``evaluate("simcse", "SICKRelatedness-trial",
   data_dir=X)`` with an empty runs folder, X the shared data without STS12: the error and its time.
4. **A plugin method.** ``docs/examples/align-uniform-method`` installed into a folder of its own,
   trained from Python and from the command line on the same sentences: weights hashes and dev scores.
5. **The saved folders load anywhere.** ``SentenceTransformer(d)`` on the folder ``.save(d)`` writes
   (part 1's model) and on the one ``benchharness train --out d`` writes: the largest difference of
   its vectors from the harness's encode (the model in memory; the folder resolved as ``run
   --encoders d`` resolves it), over the training sentences.

    python benchmarks/train_api.py [--sentences 2000] [--steps 20]

The lines are kept in ``results/benchmarks/train_api.txt``. Smoke mode (``BENCHMARK_SMOKE=1``): 64
sentences, one step, simcse from paraphrase-MiniLM-L3-v2, SICKRelatedness-trial for the score.
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

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import SMOKE, cli_command, header, report  # noqa: E402

#: the dev task both sides score, and simcse's base where the recipe's own is not wanted (smoke mode)
DEV = "SICKRelatedness-trial" if SMOKE else "STSBenchmark-dev"
SMALL_BASE = "sentence-transformers/paraphrase-MiniLM-L3-v2"


def flags(options: dict) -> list[str]:
    """``options`` as ``benchharness train`` flags."""
    return [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]


#: runs in a fresh interpreter: train in memory, note what changed, evaluate; prints one JSON line
PYTHON_SIDE = r"""
import json, os, sys, tempfile, time
from pathlib import Path

def files(*folders):
    return sorted(str(p.relative_to(Path.cwd())) for f in folders if f.exists() for p in f.rglob("*"))

watched = [Path.cwd(), Path(tempfile.gettempdir()), Path(os.environ["XDG_CACHE_HOME"]) / "benchharness",
           Path(os.environ["BENCHHARNESS_RUNS"])]
import torch
before = {"files": files(*watched), "environ": dict(os.environ), "threads": torch.get_num_threads()}
import benchharness
sentences = [l.strip() for l in Path(sys.argv[1]).read_text().splitlines()]
started = time.perf_counter()
model = benchharness.train(__METHOD__, sentences=sentences, max_steps=int(sys.argv[2]), device="cpu", seed=1,
                           data_dir=sys.argv[3], **json.loads(sys.argv[4]))
seconds = time.perf_counter() - started
after = {"files": files(*watched), "environ": dict(os.environ), "threads": torch.get_num_threads()}
sys.path.insert(0, sys.argv[5])
from train_hashes import hash_of
score = benchharness.evaluate(model, __DEV__, data_dir=sys.argv[3], intervals=False).results[0].main_score
from sentence_transformers import SentenceTransformer
saved = model.save(Path(sys.argv[6]))
loaded = SentenceTransformer(str(saved), device="cpu").encode(sentences, convert_to_numpy=True)
print(json.dumps({
    "st_max_diff": float(abs(loaded - model.encode(sentences)).max()),
    "weights": hash_of(model.model.state_dict()),
    "score": score,
    "train_seconds": round(seconds, 1),
    "files_created": sorted(set(after["files"]) - set(before["files"])),
    "files_removed": sorted(set(before["files"]) - set(after["files"])),
    "environ_changed": sorted(k for k in set(before["environ"]) | set(after["environ"])
                              if before["environ"].get(k) != after["environ"].get(k)),
    "threads": [before["threads"], after["threads"]],
    "key": model.recipe["key"],
}))
"""


def sentences_file(folder: Path, n: int) -> Path:
    """The first ``n`` sentences of the STS-B train split (both sides of each pair, in order)."""
    from benchharness.core.data_root import DataRoot
    from benchharness.data.corpora import load_corpus

    path = folder / "stsb-train.txt"
    path.write_text("".join(f"{s}\n" for s in load_corpus("stsb-train", DataRoot(SHARED / "data"))[:n]))
    return path


#: the python side's temporary folder, relative to its working folder
TMP = Path("home") / "tmp"


def environment(home: Path) -> dict[str, str]:
    """A user's environment outside the checkout: the shared Hugging Face cache, offline, and an
    empty runs folder, temporary folder and benchharness cache of its own under ``home``, so the
    files the python side sees appear are its own, not those of whatever else runs on the machine;
    the data root is given explicitly (``data_dir=``, ``--data-dir``)."""
    (home / TMP.name).mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHHARNESS_")}
    env.update(
        HF_HUB_CACHE=str(SHARED / "hf" / "hub"),
        HF_HUB_OFFLINE="1",
        BENCHHARNESS_RUNS=str(home / "runs"),
        TMPDIR=str(home / TMP.name),
        XDG_CACHE_HOME=str(home / "cache"),
    )
    return env


def python_side(method: str, corpus: Path, steps: int, env: dict[str, str], cwd: Path, options: dict) -> dict:
    script = PYTHON_SIDE.replace("__METHOD__", repr(method)).replace("__DEV__", repr(DEV))
    done = subprocess.run(
        [sys.executable, "-c", script, str(corpus), str(steps), str(SHARED / "data"), json.dumps(options)]
        + [str(Path(__file__).resolve().parent), str(cwd / f"saved-{method}")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"python side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def command_side(method: str, corpus: Path, steps: int, env: dict[str, str], cwd: Path, flags: list[str]) -> dict:
    from train_hashes import hash_of
    from transformers import AutoModel

    out = cwd / f"cli-{method}"
    started = time.perf_counter()
    train = cli_command("train", method, "--data", str(corpus), "--max-steps", str(steps))
    train += ["--device", "cpu", "--seed", "1", "--out", str(out), "-q", *flags]
    done = subprocess.run(
        train,
        cwd=cwd,
        env={**env, "BENCHHARNESS_DATA": str(SHARED / "data")},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"benchharness train failed:\n{done.stderr[-3000:]}")
    seconds = time.perf_counter() - started
    results = cwd / f"results-{method}"
    run = cli_command("run", "--encoders", str(out), "--tasks", DEV)
    run += ["--data-dir", str(SHARED / "data"), "--results-dir", str(results), "--no-cache", "-q"]
    done = subprocess.run(run, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"benchharness run failed:\n{done.stderr[-3000:]}")
    [stored] = results.glob(f"*/{DEV}.json")
    manifest = json.loads((out / "manifest.json").read_text())
    return {
        "st_max_diff": st_max_diff(out, corpus, env),
        "weights": hash_of(AutoModel.from_pretrained(out).state_dict()),
        "score": json.loads(stored.read_text())["main_score"],
        "train_seconds": round(seconds, 1),
        "key": manifest["recipe"]["key"],
    }


def st_max_diff(folder: Path, corpus: Path, env: dict[str, str]) -> float:
    """The largest difference between ``SentenceTransformer(folder)``'s vectors of the corpus and the
    harness's (the folder resolved as ``run --encoders <folder>`` resolves it), in a fresh interpreter."""
    script = f"""
import json
from pathlib import Path
from sentence_transformers import SentenceTransformer
from benchharness.evaluation.resolver import Resolver
sentences = [l.strip() for l in Path({str(corpus)!r}).read_text().splitlines()]
loaded = SentenceTransformer({str(folder)!r}, device="cpu").encode(sentences, convert_to_numpy=True)
print(float(abs(loaded - Resolver(train_missing=False).get({str(folder)!r}).encode(sentences)).max()))
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"SentenceTransformer on {folder} failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def data_root_without_sts12(folder: Path) -> Path:
    """The shared data as symbolic links, STS12's folder left out."""
    data = SHARED / "data"
    root = folder / "data-without-sts12"
    for child in data.iterdir():
        if child.name != "senteval":
            (root / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / child.name).symlink_to(child)
    for child in (data / "senteval").iterdir():
        if child.name != "STS":
            (root / "senteval" / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / "senteval" / child.name).symlink_to(child)
    for child in (data / "senteval" / "STS").iterdir():
        if not child.name.startswith("STS12"):
            (root / "senteval" / "STS" / child.name).parent.mkdir(parents=True, exist_ok=True)
            (root / "senteval" / "STS" / child.name).symlink_to(child)
    return root


def on_demand(env: dict[str, str], cwd: Path) -> dict:
    root = data_root_without_sts12(cwd)
    script = f"""
import time, benchharness
started = time.perf_counter()
try:
    benchharness.evaluate("simcse", "SICKRelatedness-trial", data_dir={str(root)!r}, device="cpu")
except benchharness.EvaluationFailedError as exc:
    print(round(time.perf_counter() - started, 1)); print(str(exc))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    lines = done.stdout.strip().splitlines()
    runs = Path(env["BENCHHARNESS_RUNS"])
    return {
        "seconds": float(lines[0]),
        "error": "\n".join(lines[1:]).replace(str(cwd), "<tmp>"),
        "model_loaded": "Loading weights" in done.stderr,
        "runs_folder_left": sorted(str(p.relative_to(runs)) for p in runs.rglob("*")) if runs.exists() else [],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=64 if SMOKE else 2000)
    parser.add_argument("--steps", type=int, default=1 if SMOKE else 20)
    args = parser.parse_args()

    lines = [header()]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        env = environment(cwd / TMP.parent)
        corpus = sentences_file(cwd, args.sentences)
        small = {"base": SMALL_BASE} if SMOKE else {}
        mine = python_side("simcse", corpus, args.steps, env, cwd, small)
        theirs = command_side("simcse", corpus, args.steps, env, cwd, flags(small))
        torchs = [f for f in mine["files_created"] if Path(f).match(f"{TMP}/torchinductor_*")]
        ours = [f for f in mine["files_created"] if f not in torchs]
        lines += [
            (
                f"1. simcse{f' from {SMALL_BASE}' if small else ''}, {args.sentences} STS-B train sentences, "
                f"{args.steps} steps, seed 1, cpu"
            ),
            (
                f"   benchharness.train + evaluate: weights {mine['weights']}  {DEV} {mine['score']:.4f}"
                f"  ({mine['train_seconds']} s training; recipe {mine['key']})"
            ),
            (
                f"   benchharness train + run:      weights {theirs['weights']}  {DEV} {theirs['score']:.4f}"
                f"  ({theirs['train_seconds']} s the command; recipe {theirs['key']})"
            ),
            f"   equal: weights {mine['weights'] == theirs['weights']}, score {mine['score'] == theirs['score']}",
            (
                f"   SentenceTransformer(d) against the harness's encode of the {args.sentences} sentences, largest "
                f"difference: .save(d) {mine['st_max_diff']:.2e}, train --out d {theirs['st_max_diff']:.2e}"
            ),
            (
                "2. train() without out=: files created "
                f"{ours or 'none'}, removed {mine['files_removed'] or 'none'}; os.environ changed: "
                f"{mine['environ_changed'] or 'none'}; torch threads before/after {mine['threads']}"
            ),
            f"   created by importing torch._dynamo (torch's own, not the call's): {torchs or 'none'}",
        ]
        demand = on_demand(env, cwd)
        lines += [
            (
                "3. evaluate('simcse', 'SICKRelatedness-trial', data_dir=X without STS12), empty runs folder: "
                f"{demand['seconds']} s, a model loaded: {demand['model_loaded']}"
            ),
            *(f"   {line}" for line in demand["error"].splitlines()),
            f"   left in the runs folder: {demand['runs_folder_left']}",
        ]
        site = cwd / "site"
        example = ROOT / "docs" / "examples" / "align-uniform-method"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site)]
            + [str(example)],
            check=True,
            capture_output=True,
        )
        plugin_env = {**env, "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")])}
        base = SMALL_BASE
        mine = python_side("align-uniform", corpus, args.steps, plugin_env, cwd, {"base": base})
        theirs = command_side("align-uniform", corpus, args.steps, plugin_env, cwd, flags({"base": base}))
        lines += [
            f"4. the plugin method align-uniform on {base}, the same sentences and steps",
            f"   benchharness.train: weights {mine['weights']}  {DEV} {mine['score']:.4f}",
            f"   benchharness train: weights {theirs['weights']}  {DEV} {theirs['score']:.4f}",
            f"   equal: weights {mine['weights'] == theirs['weights']}, score {mine['score'] == theirs['score']}",
        ]
    report("train_api", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
