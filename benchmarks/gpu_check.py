"""The GPU check: CUDA evaluation and training proven and timed on a GPU machine, in one short run.

A GPU machine is lent rarely and briefly, cannot reach a package registry, and receives only the
project's files and 64 MiB of what the check brings along. So the check comes in two steps:

    python benchmarks/gpu_check.py prepare          # here: builds .gpu-bundle/ (git-ignored)
    python3 benchmarks/gpu_check.py run             # there, with .gpu-bundle carried along

``prepare`` gathers the bundle: the wheels the GPU machine lacks (faiss-cpu, nltk and its click;
setuptools to install the project), paraphrase-MiniLM-L3-v2's configuration and
tokenizer in a Hugging Face cache layout, without its 69 MB of weights, and the STS and SICK files,
the dictionary DefSent+ trains on and the stopwords PaSeR reads. ``run`` then, in at most a few minutes:

1. installs the wheels and the project without dependencies over the machine's own torch, in a
   virtual environment that sees the system's packages (``--no-install``: the current one), and
   says which of benchharness's dependencies that environment still lacks;
2. writes seeded random weights into the bundle's MiniLM (``seed``), so that ``minilm-l3``, ``st:``
   and ``hf:`` names all load the same weights, and compares the device with that machine's own
   CPU on them: GPU and CPU numbers come from the same weights, both computed there;
3. runs the tests marked ``cuda`` (``tests/cuda``);
4. ``agree``: the STS suite on the CPU in fp32 and on the device in fp32, fp16 and bf16, side by
   side, the device's peak memory, and what a batch that does not fit does (the memory the process
   may use is cut until one does not: the encoding must back off, say so in one line, and give the
   same scores);
5. the STS suite cold, benchharness against sentence-transformers' evaluators on the same device
   (``sts_vs_sentence_transformers.py``), and each recipe's training step against its FLOP floor, the
   simcse step against sentence-transformers' trainer (``train_throughput.py``);
6. writes everything to ``results/benchmarks/gpu_check.txt`` and, where the device tool collects
   files, ``$OUT/gpu_check.txt``, naming the GPU (a dry run: ``gpu_check-dry-run.txt``).

Each part runs in its own process with a time limit; a part that fails is reported with its
output and the rest still runs. The dry run on a machine without a GPU runs the same code on the
CPU: ``python benchmarks/gpu_check.py run --device cpu --no-install``. Scores from seeded weights
mean nothing as scores: only the device's agreement with the CPU on them is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import SMOKE, report
from machine import header as machine_header

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / ".gpu-bundle"
MODEL = "sentence-transformers/paraphrase-MiniLM-L3-v2"
#: what the GPU machine lacks among benchharness's imports (faiss-cpu, nltk and its click), and what
#: installs the project (setuptools). Not matplotlib and its own (23 MB): DefSent+ leaves its plots out
#: without it, and nothing else the check runs draws
WHEELS = ("setuptools", "faiss-cpu", "nltk", "click")
#: the evaluation data the check reads, relative to the data root (PaSeR's keyword extraction reads
#: NLTK's English stopwords; WordNet, 36 MB, does not fit: PaSeR augments by random deletion there)
DATA = ("senteval/STS", "senteval/SICK", "oxford", "nltk_data/corpora/stopwords")
#: what the device tool carries: the project's files and the bundle, together
LIMIT_MIB = 64
STS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")
RECIPES = ("simcse", "consert", "paser", "defsent-plus")
if SMOKE:  # the code path on a tiny input (benchmarks/machine.py): SICK-R's trial pairs, one recipe
    STS, RECIPES = ("SICKRelatedness-trial",), ("simcse",)
#: WordNet's 36 MB do not fit the bundle: DefSent+ trains on Oxford's definitions there, PaSeR's
#: augmentation is random deletion instead of WordNet synonyms (the step's shapes are the same)
RECIPE_OPTIONS = {
    "defsent-plus": ["--option", "dictionary=oxford-valid,oxford-test"],
    "paser": ["--option", "augment=rd"],
}


# ---- prepare (here) -------------------------------------------------------------------------------


def prepare(out: Path, python_version: str, wheels: bool = True) -> None:
    """The bundle: wheels for the GPU machine's Python (``wheels``: False, none: the smoke run has
    no registry to download from), the MiniLM's small files, the data."""
    from huggingface_hub import snapshot_download
    from machine import config, data_root

    if out.exists():
        shutil.rmtree(out)
    if wheels:
        download_wheels(out / "wheels", python_version)
    snapshot = Path(snapshot_download(MODEL, cache_dir=config().hub().cache, local_files_only=True))
    repo = out / "hub" / f"models--{MODEL.replace('/', '--')}"
    target = repo / "snapshots" / snapshot.name
    shutil.copytree(snapshot, target, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(snapshot.name)
    data = data_root().root
    for rel in DATA:
        shutil.copytree(data / rel, out / "data" / rel)
    project = tracked_mib()
    size = mib(out)
    print(f"bundle {out}: {size:.1f} MiB, with the project's files ({project:.1f} MiB) {size + project:.1f} MiB")
    for part in sorted(out.iterdir()):
        print(f"  {part.name}: {mib(part):.1f} MiB")
    if size + project > LIMIT_MIB:
        raise SystemExit(f"{size + project:.1f} MiB is over the {LIMIT_MIB} MiB the device tool carries")


def mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def tracked_mib() -> float:
    """The project's files as the device tool copies them (those git tracks)."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    return sum((ROOT / n.decode()).stat().st_size for n in names if n and (ROOT / n.decode()).is_file()) / 2**20


def download_wheels(folder: Path, python_version: str) -> None:
    """The wheels the GPU machine lacks, for its Python on x86-64 Linux, without dependencies."""
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
            "--python-version", python_version, "--platform", "manylinux_2_28_x86_64",
            "--platform", "manylinux_2_17_x86_64", "--platform", "any", "-d", str(folder), *WHEELS,
        ],
        check=True,
    )  # fmt: skip


# ---- seed (there, in the check's environment) -------------------------------------------------------


def seed(bundle: Path) -> str:
    """Seeded random weights for the bundle's MiniLM, from its own configuration (torch seed 0)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModel

    repo = bundle / "hub" / f"models--{MODEL.replace('/', '--')}"
    snapshot = repo / "snapshots" / (repo / "refs" / "main").read_text().strip()
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.from_pretrained(snapshot))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(snapshot / "model.safetensors"))
    return f"seeded {sum(p.numel() for p in model.parameters())} parameters into {snapshot.name}"


# ---- agree (there): the STS suite on the CPU and the device, and a batch that does not fit ---------


def agree(device: str) -> dict[str, object]:
    """STS main scores of the seeded MiniLM: CPU fp32, then the device in each precision (as ``st:``
    specs; ``minilm-l3``, the catalogue name, in fp32); the device's peak memory; the back-off."""
    import logging

    import torch

    import benchharness

    def suite(spec: str, on: str, batch_size: int | None = None) -> dict[str, float]:
        """Main scores x100; no embedding cache, so every sentence is encoded by this call."""
        results = benchharness.evaluate(spec, list(STS), device=on, batch_size=batch_size, intervals=False)
        return {r.task: round(r.main_score, 4) for r in results}

    out: dict[str, object] = {"cpu fp32": suite(f"st:{MODEL}", "cpu")}
    cuda = device.startswith("cuda")
    for precision in ("fp32", "fp16", "bf16"):
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        try:
            out[f"{device} {precision}"] = suite(f"st:{MODEL}?precision={precision}", device)
        except Exception as exc:  # a precision this device refuses: said, and the rest goes on
            out[f"{device} {precision}"] = f"{type(exc).__name__}: {exc}"
        if cuda:
            out[f"{device} {precision} peak MiB"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    out[f"{device} fp32 (minilm-l3)"] = suite("minilm-l3", device)
    if cuda:
        out["back-off"] = back_off(device, suite, logging)
    return out


def back_off(device: str, suite, logging) -> dict[str, object]:
    """A batch that does not fit: the process's share of the device is cut to a little more than the
    weights need, the batches are made as large as one length group, and the scores must equal the
    unconstrained run's, with one warning line."""
    import torch

    wanted = suite(f"st:{MODEL}", device)
    total = torch.cuda.mem_get_info()[1]
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Keep(logging.WARNING)
    logging.getLogger("benchharness").addHandler(handler)
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, 400 * 2**20 / total))
    try:
        got = suite(f"st:{MODEL}", device, batch_size=100_000)  # token batches as large as a length group
    except torch.OutOfMemoryError as exc:
        got = {"error": f"OutOfMemoryError: {str(exc).splitlines()[0]}"}
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        logging.getLogger("benchharness").removeHandler(handler)
    same = all(abs(got.get(t, float("nan")) - wanted[t]) < 1e-6 for t in wanted)
    return {
        "memory cap MiB": 400,
        "scores equal to the unconstrained run": same,
        "warnings": [r for r in records if "out of device memory" in r],
        "scores": got,
    }


# ---- run (there): every part, each in its own process ---------------------------------------------


def run(args: argparse.Namespace) -> int:
    bundle = args.bundle.resolve()
    lines: list[str] = [header(args.device)]
    python = sys.executable
    if not args.no_install:
        python, installed = install(bundle)
        lines += installed
    lines.append(f"dependencies of benchharness this python lacks: {', '.join(lacking(python)) or 'none'}")
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(bundle / "hub"),
        "HF_HUB_OFFLINE": "1",
        "BENCHHARNESS_DATA": str(bundle / "data"),
        "BENCHHARNESS_TEST_DEVICE": args.device,
        "TOKENIZERS_PARALLELISM": "false",
    }
    me = [python, str(Path(__file__).resolve())]
    parts: list[tuple[str, list[str], int]] = [
        ("seeded weights", [*me, "seed", "--bundle", str(bundle)], 120),
        (
            "tests marked cuda",
            [python, "-m", "pytest", "-m", "cuda", "tests/cuda", "-q", "-rs", "-p", "no:cacheprovider"],
            240,
        ),
        ("CPU and device on the same weights", [*me, "agree", "--device", args.device], 240),
        (
            "STS suite cold: benchharness against sentence-transformers' evaluators",
            [python, "benchmarks/sts_vs_sentence_transformers.py", "--model", "minilm-l3", "--device", args.device],
            240,
        ),
    ]
    precision = "bf16" if args.device.startswith("cuda") else "fp32"
    for recipe in RECIPES:
        command = [python, "benchmarks/train_throughput.py", "--recipe", recipe, "--device", args.device]
        command += ["--steps", str(args.steps), "--floor", "--precision", precision, *RECIPE_OPTIONS.get(recipe, [])]
        parts.append((f"training step: {recipe}", command + (["--versus"] if recipe == "simcse" else []), 180))
    for title, command, limit in parts:
        lines += part(title, command, env, limit)
    name = "gpu_check" if args.device.startswith("cuda") else "gpu_check-dry-run"  # never mistaken for it
    report(name, lines)
    if os.environ.get("OUT"):  # where the device tool collects files
        (Path(os.environ["OUT"]) / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return 0


def header(device: str) -> str:
    """The benchmarks' head line (command, commit, date, CPU, load), then the GPU's."""
    import platform

    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        gpu = f"GPU {torch.cuda.get_device_name()} (CUDA {torch.version.cuda}, torch {torch.__version__})"
    else:
        gpu = f"no GPU: dry run on {device} (torch {torch.__version__})"
    return (
        f"{machine_header()}\n# {gpu}; python {platform.python_version()}; "
        "seeded paraphrase-MiniLM-L3-v2 weights (scores are not the model's)"
    )


def install(bundle: Path) -> tuple[str, list[str]]:
    """A virtual environment over the system's packages, with the bundle's wheels and the project
    (no dependency resolved: the machine's torch and transformers stay)."""
    env = Path("/tmp/benchharness-gpu-env")
    steps = [
        [sys.executable, "-m", "venv", "--system-site-packages", str(env)],
        [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--find-links", str(bundle / "wheels"), *WHEELS],
        [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "-e", str(ROOT)],
    ]  # fmt: skip
    lines = ["", "## install"]
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines.append(f"$ {' '.join(Path(c).name if c.startswith('/') else c for c in command)}: exit {done.returncode}")
        if done.returncode:
            lines.append(done.stderr[-2000:])
    return str(env / "bin" / "python"), lines


#: the distributions benchharness requires (its own metadata, extras left out) that ``python`` cannot find
LACKING = """
import importlib.metadata as metadata, json, re
required = [re.split(r"[\\s;<>=!~\\[(]", r)[0] for r in metadata.requires("benchharness") or [] if "extra ==" not in r]
def found(name):
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True
print(json.dumps([name for name in required if not found(name)]))
"""


def lacking(python: str) -> list[str]:
    """What the machine lacks, said at the top of the report: a part that fails for want of a
    package is then explained before its traceback is read."""
    done = subprocess.run([python, "-c", LACKING], capture_output=True, text=True, check=False)
    if done.returncode:
        return [f"(could not tell: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode})"]
    return json.loads(done.stdout)


def part(title: str, command: list[str], env: dict[str, str], limit: int) -> list[str]:
    """Run one part in its own process; its output, its time and how it ended go to the report."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit, check=False)
        ended, output = f"exit {done.returncode}", done.stdout + (done.stderr[-3000:] if done.returncode else "")
    except subprocess.TimeoutExpired as exc:
        ended, output = f"stopped after {limit} s", (exc.stdout or b"").decode(errors="replace")[-3000:]
    lines = ["", f"## {title} ({ended}, {time.perf_counter() - t0:.0f} s)", ""]
    return lines + [line for line in output.strip().splitlines() if line.strip()][-60:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="build the bundle the GPU machine needs (here)")
    p.add_argument("--out", type=Path, default=BUNDLE)
    p.add_argument("--python-version", default="3.12", help="the GPU machine's Python (its wheels' tag)")
    p = sub.add_parser("run", help="the check (on the GPU machine)")
    p.add_argument("--bundle", type=Path, default=BUNDLE)
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per recipe")
    p.add_argument("--no-install", action="store_true", help="use this environment as it is")
    p = sub.add_parser("seed", help=argparse.SUPPRESS)
    p.add_argument("--bundle", type=Path, default=BUNDLE)
    p = sub.add_parser("agree", help=argparse.SUPPRESS)
    p.add_argument("--device", default="cuda")
    if SMOKE and len(sys.argv) == 1:  # the whole path on a tiny input, with a bundle of no wheels
        bundle = Path(tempfile.mkdtemp(prefix="gpu-check-smoke-")) / "bundle"
        prepare(bundle, "3.12", wheels=False)
        return run(
            parser.parse_args(["run", "--bundle", str(bundle), "--device", "cpu", "--no-install", "--steps", "1"])
        )
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.out, args.python_version)
    elif args.step == "seed":
        print(seed(args.bundle))
    elif args.step == "agree":
        print(json.dumps(agree(args.device), indent=1))
    else:
        return run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
