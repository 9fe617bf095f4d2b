"""The reliability findings of the newest surfaces, each tried as a user (or an attacker) would, with
the line the command answers: run once per interpreter given, so that an old checkout's answers
stand beside today's (``--python old/.venv/bin/python --python .venv/bin/python``).

Each probe sets up a project in a temporary folder, runs the command line in a fresh process of that
interpreter (whose installed ``benchharness`` is the one tried) and prints the line that shows the
behaviour: the status of a run, its one-line error, what a server on 127.0.0.1 received, how long
it took. Lines are cut to 150 characters, with the temporary folder and the work folder replaced by
placeholders; the secret the probes plant in the environment is a fake one.

    python benchmarks/reliability_probes.py --python OLD_PYTHON --python NEW_PYTHON

Smoke mode (``BENCHMARK_SMOKE=1``): two probes, with this interpreter.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# this script owns its process: the shared hub cache, offline, before anything reads it
os.environ.setdefault("HF_HUB_CACHE", str(ROOT.parent / "shared" / "hf" / "hub"))
os.environ["HF_HUB_OFFLINE"] = "1"

from tests.faults.test_newest_surfaces import (  # noqa: E402 (the checkout on the path first)
    SECRET,
    _beir,
    _drip,
    _drip_after_the_probe,
    _pairs_project,
    _reranking_project,
    _Server,
)
from tests.helpers import DATA, HF_CACHE, MINILM_L3, make_tiny_bert  # noqa: E402

WIDTH = 150
#: the environment of every probe: the data, the hub cache offline, and a planted fake secret
ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": os.environ.get("HOME", "/tmp"),
    "BENCHHARNESS_DATA": str(DATA),
    "HF_HUB_CACHE": str(HF_CACHE),
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CI_DEPLOY_TOKEN": SECRET,
}


class Probe:
    """One interpreter's try of the probes, in its own temporary folders."""

    def __init__(self, python: str, scratch: Path, tiny: Path) -> None:
        self.python, self.scratch, self.tiny = python, scratch, tiny
        scratch.mkdir(parents=True, exist_ok=True)

    def folder(self, name: str) -> Path:
        path = self.scratch / name
        path.mkdir(parents=True)
        return path

    def cli(self, cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[str, float]:
        """stdout + stderr of ``benchharness ARGS`` and its seconds; a run past ``timeout`` is killed."""
        start = time.monotonic()
        try:
            done = subprocess.run(
                [self.python, "-m", "benchharness.cli", *args],
                cwd=cwd,
                env={**ENV, **(env or {})},
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            out = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            out = f"(still running after {timeout:.0f} s: killed)"
        return out, time.monotonic() - start

    def run(self, cwd: Path, encoder: str, task: str, *more: str, **kwargs: Any) -> tuple[str, float]:
        """``benchharness run`` of one encoder on one task with no cache, each probe's case from scratch
        (``more``: other flags; ``kwargs``: ``cli``'s)."""
        return self.cli(cwd, "run", "--encoders", encoder, "--tasks", task, "--no-cache", *more, **kwargs)

    def python_code(self, cwd: Path, code: str, *args: str) -> str:
        """What ``python -c CODE ARGS`` prints, its standard output (else its errors)."""
        done = subprocess.run([self.python, "-c", code, *args], cwd=cwd, env=ENV, capture_output=True, text=True)
        return (done.stdout.strip() or done.stderr.strip()) or "(no output)"


def line(text: str, *needles: str) -> str:
    """The first line holding every needle (else the last error-looking line, else the last line)."""
    lines = [x for x in text.splitlines() if x.strip()]
    for x in lines:
        if all(n in x for n in needles):
            return x
    errors = [x for x in lines if "error" in x.lower()]
    return (errors or lines or ["(no output)"])[-1]


def status(text: str, task: str) -> str:
    """The status, score and note of the task's row in the run's table."""
    row = line(text, f"| {task} ").split("|")
    return " | ".join(c.strip() for c in row[3:6]) if len(row) > 5 else row[0]


def _beir_project(d: Path) -> Path:
    """A project of the tests' small BEIR folder (``d/beir``) declared as the retrieval task ``b``;
    the folder, for the probe to alter."""
    (d / "benchharness.toml").write_text('[tasks.b]\nkind = "retrieval"\nfolder = "beir"\n')
    return _beir(d / "beir")


@contextlib.contextmanager
def _serving(answer: Callable[[Any], None]) -> Iterator[Any]:
    """A fake OpenAI-compatible server (the tests' ``_Server``) answering with ``answer`` while the
    block runs, closed however it ends."""
    server = _Server(answer)
    try:
        yield server
    finally:
        server.close()


def _openai(server: Any, query: str) -> str:
    """The spec of a model served by ``server``, its identity pinned, with ``query``'s parameters too."""
    return f"openai:m?base_url=http://127.0.0.1:{server.port}/v1&identity=p&{query}"


# ---- the probes: each returns its line -------------------------------------------------------------


def instruction_reuse(p: Probe) -> str:
    d = p.folder("instruction")
    spec = f"hf:{p.tiny}?document_prompt=passage:%20"
    _reranking_project(d, "Find the answer to: ")
    p.run(d, spec, "rb")
    _reranking_project(d, "Retrieve a passage that mentions: ")
    out, _ = p.run(d, spec, "rb")
    return "second run, instruction changed: " + status(out, "rb")


def proc_symlink(p: Probe) -> str:
    d = p.folder("proc")
    (_beir_project(d) / "qrels" / "test.tsv").symlink_to("/proc/self/environ")
    out, _ = p.run(d, "glove-50d", "b")
    return f"secret shown: {SECRET in out}; " + status(out, "b")


def redirect(p: Probe) -> str:
    d = p.folder("redirect")
    _pairs_project(d)
    with _serving(lambda h: (h.send_response(200), h.end_headers())) as other:

        def go(h) -> None:
            h.send_response(302)
            h.send_header("Location", f"http://localhost:{other.port}{h.path}")
            h.send_header("Content-Length", "0")
            h.end_headers()

        with _serving(go) as first:
            out, _ = p.run(d, _openai(first, "api_key_env=KEY&retries=0"), "mine", env={"KEY": SECRET})
    keyed = sum("Authorization" in headers for _, _, headers in other.received)
    return f"other origin received {len(other.received)} request(s), {keyed} with the key; " + status(out, "mine")


def manifest(p: Probe) -> str:
    d = p.folder("manifest")
    _pairs_project(d)
    (d / "benchharness.toml").write_text('[paths]\nruns_dir = "runs"\n\n[tasks.mine]\nfile = "pairs.csv"\n')
    with _serving(lambda h: (h.send_response(500), h.end_headers())) as server:
        encoder = {"type": "openai", "model": "m", "base_url": f"http://127.0.0.1:{server.port}/v1"}
        (d / "runs" / "x").mkdir(parents=True)
        encoder.update({"api_key_env": "CI_DEPLOY_TOKEN", "identity": "p", "retries": 0})
        (d / "runs" / "x" / "manifest.json").write_text(json.dumps({"name": "x", "encoder": encoder}))
        (d / "runs" / "x" / "m").touch()  # the run's model, named relative to its folder, is there
        out, _ = p.run(d, "x", "mine")
    keyed = sum(SECRET in json.dumps(headers) for _, _, headers in server.received)
    return f"server received {len(server.received)} request(s), {keyed} with the token; " + line(out, "manifest")


def drip(p: Probe) -> str:
    d = p.folder("drip")
    _pairs_project(d)
    with _serving(_drip) as server:
        out, seconds = p.run(d, _openai(server, "timeout=2&retries=0"), "mine", timeout=60)
    return f"{seconds:.1f} s; " + (status(out, "mine") if "| mine " in out else line(out))


def ctrl_c(p: Probe) -> str:
    d = p.folder("ctrl-c")
    _pairs_project(d)
    with _serving(_drip_after_the_probe) as server:
        spec = _openai(server, "retries=0")
        proc = subprocess.Popen(
            [p.python, "-m", "benchharness.cli", "run", "--encoders", spec, "--tasks", "mine", "--no-cache"],
            cwd=d,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while sum(m == "POST" for m, _, _ in server.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        try:
            proc.wait(30)
            return f"ended {time.monotonic() - start:.1f} s after Ctrl-C (exit {proc.returncode})"
        except subprocess.TimeoutExpired:
            proc.kill()
            return "still running 30 s after Ctrl-C: killed"


def degenerate(p: Probe) -> str:
    d = p.folder("degenerate")
    beir = _beir_project(d)
    docs = [{"_id": f"d{i}", "text": f"document number {i} about {w}"} for i, w in enumerate("abcdef")]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(x) + "\n" for x in docs))
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "about c"}\n{"_id": "q2", "text": "about e"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td4\t1\n")
    prompt = "%20".join(["represent%20this%20passage%20for%20retrieval"] * 4)
    spec = f"hf:{p.tiny}?max_length=8&document_prompt={prompt}"
    out, _ = p.run(d, spec, "b")
    return "status, score, note: " + status(out, "b")


def prompt_one(p: Probe) -> str:
    d = p.folder("prompt-one")
    _pairs_project(d)
    out, _ = p.run(d, f"hf:{p.tiny}?prompt=1", "mine")
    return line(out, "prompt") if "prompt" in out and "error" in out else status(out, "mine")


def prompt_long(p: Probe) -> str:
    d = p.folder("prompt-long")
    _pairs_project(d)
    prompt = "%20".join(["represent this sentence for searching relevant passages"] * 3)
    spec = f"hf:{p.tiny}?max_length=16&prompt={prompt}"
    out, _ = p.run(d, spec, "mine")
    warned = "warning: ..." + line(out, "max_length)").split("'", 2)[-1] if "max_length)" in out else "no warning"
    return f"{warned}; status, score, note: {status(out, 'mine')}"


def long_line(p: Probe) -> str:
    d = p.folder("long-line")
    beir = _beir_project(d)
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with (beir / "corpus.jsonl").open("a") as fh:
        fh.write('{"_id": "d3", "text": "' + "x" * (2**26 + 10) + '"}\n')
    out, seconds = p.run(d, "glove-50d", "b")
    return f"{seconds:.1f} s; " + status(out, "b")


def refused_table(p: Probe) -> str:
    d = p.folder("refused")
    _pairs_project(d)
    _beir(d / "beir")
    with (d / "benchharness.toml").open("a") as fh:
        fh.write('\n[tasks.stsb-beir]\nkind = "retrieval"\nfile = "beir"\n')
    out, _ = p.run(d, "glove-50d", "stsb-beir")
    others, _ = p.run(d, "glove-50d", "mine")
    return f"the other file task: {status(others, 'mine')}; asking for it: " + line(out, "stsb-beir")


def key_echo(p: Probe) -> str:
    d = p.folder("key-echo")
    _pairs_project(d)

    def echo(h) -> None:
        body = json.dumps({"error": {"message": f"bad request from {h.headers.get('Authorization')}"}}).encode()
        h.send_response(400)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with _serving(echo) as server:
        out, _ = p.run(d, _openai(server, "api_key_env=KEY"), "mine", env={"KEY": SECRET})
    return f"key shown: {SECRET in out}; " + status(out, "mine").replace(SECRET, "<the fake key>")


def password_url(p: Probe) -> str:
    d = p.folder("password")
    _pairs_project(d)
    out, _ = p.cli(d, "run", "--encoders", f"openai:m?base_url=http://u:{SECRET}@127.0.0.1:9/v1", "--tasks", "mine")
    return f"password shown: {SECRET in out}; " + line(out).replace(SECRET, "<the fake password>")


def swapped_sentences(p: Probe) -> str:
    d = p.folder("vectors")
    _pairs_project(d)
    p.cli(d, "sentences", "--tasks", "mine", "--out", "vec")
    lines = (d / "vec" / "sentences.jsonl").read_text().splitlines(keepends=True)
    save = "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).normal(size=(int(sys.argv[2]), 4)))"
    p.python_code(d, save, "vec/vectors.npy", str(len(lines)))
    (d / "vec" / "sentences.jsonl").write_text("".join([lines[1], lines[0], *lines[2:]]))
    out, _ = p.run(d, "vectors:vec", "mine")
    return "status, score, note: " + status(out, "mine")


IDENTITY = """
import sys, torch
from sentence_transformers import SentenceTransformer
from benchharness.evaluation.models import as_encoder
torch.manual_seed(int(sys.argv[1]))
print(as_encoder(SentenceTransformer(sys.argv[2], device="cpu")).identity)
"""


def identity(p: Probe) -> str:
    ids = [p.python_code(p.scratch, IDENTITY, seed, MINILM_L3).splitlines()[-1] for seed in ("1", "2")]
    return f"MiniLM-L3 loaded in two processes (seeds 1, 2): identities {', '.join(ids)}"


def unpinned_files(p: Probe) -> str:
    d = p.folder("unpinned")
    data = d / "data"
    (data / "probing").mkdir(parents=True)
    rows = [
        f"{split}\t{lab}\tthe {lab.lower()} sentence {i} k{j}"
        for split, n in (("tr", 60), ("va", 20), ("te", 20))
        for i in range(n)
        for j, lab in enumerate(("PAST", "PRES"))
        if i % 2 == j
    ]
    (data / "probing" / "past_present.txt").write_text("\n".join(rows) + "\n")
    for folder in ("senteval", "glove"):
        (data / folder).symlink_to(DATA / folder)
    p.run(d, "glove-50d", "Tense-fast", "--data-dir", str(data))
    [stored] = (d / "results").glob("*/Tense-fast.json")
    return f"a probing file without a known sha256: verified = {json.loads(stored.read_text())['data']['verified']}"


THREADS = """
import threading, sys, benchharness
out = []
def run():
    try:
        tasks = ["STSBenchmark", "SICKRelatedness-trial"]
        r = benchharness.evaluate("glove-50d", tasks, cache_dir=sys.argv[1], intervals=False)
        out.append("failed" if r.failed else "ok")
    except Exception as exc:
        out.append(type(exc).__name__ + ": " + str(exc).splitlines()[0])
threads = [threading.Thread(target=run) for _ in range(2)]
[t.start() for t in threads]; [t.join() for t in threads]
print("; ".join(out))
"""


def threads(p: Probe) -> str:
    said = p.python_code(p.scratch, THREADS, str(p.scratch / "shared-cache")).splitlines()
    return "two threads, one cache_dir: " + said[-1]


def progress_log(p: Probe) -> str:
    d = p.folder("log")
    _pairs_project(d)
    command = [p.python, "-m", "benchharness.cli", "run", "--encoders", f"hf:{p.tiny}", "--tasks", "mine", "--no-cache"]
    done = subprocess.run(command, cwd=d, env=ENV, capture_output=True, text=True)
    frames = done.stderr.count("%|")
    return f"stderr to a file: {frames} progress-bar frame(s), {done.stderr.count(chr(13))} carriage return(s)"


CONCAT = """
import benchharness
a = benchharness.evaluate("glove-50d", "STSBenchmark-dev")
b = benchharness.evaluate("glove-50d+whitening", "STSBenchmark-dev")
try:
    print(f"a + b: {len(a + b)} results, one frame of {len((a + b).to_pandas())} rows")
except Exception as exc:
    print(f"a + b: {type(exc).__name__}: {exc}")
"""


def results_concat(p: Probe) -> str:
    return p.python_code(p.scratch, CONCAT).splitlines()[-1]


COMMIT = "from benchharness.core.provenance import versions; print(versions().get('git_commit'))"

PROBES: dict[str, Callable[[Probe], str]] = {
    "1 instruction decides reuse": instruction_reuse,
    "2 data file linked to /proc": proc_symlink,
    "3 redirect to another origin": redirect,
    "4 manifest naming openai": manifest,
    "5 dripping server (timeout=2)": drip,
    "5 Ctrl-C on a dripping server": ctrl_c,
    "6 degenerate retrieval encoder": degenerate,
    "prompts: ?prompt=1": prompt_one,
    "prompts: longer than max_length": prompt_long,
    "limits: a 64 Mi-character corpus line": long_line,
    "file tasks: one refused table": refused_table,
    "server: key echoed in an error": key_echo,
    "server: password in base_url": password_url,
    "vectors: swapped sentences": swapped_sentences,
    "identity: one checkpoint, two loads": identity,
    "probing: unpinned files": unpinned_files,
    "threads: one cache_dir": threads,
    "logs: progress off a terminal": progress_log,
    "results: a + b": results_concat,
}


def main() -> int:
    from machine import SMOKE, header, report

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", help="an interpreter whose benchharness is tried (repeat)")
    args = parser.parse_args()
    # run from temporary folders: a relative path (as the head line shows it) made absolute first
    pythons = [str(Path(python).absolute()) for python in args.python or [sys.executable]]
    probes = dict(list(PROBES.items())[1:3]) if SMOKE else PROBES
    lines = [header(), "# per probe: the line each interpreter's benchharness answers (in the order given)"]
    with tempfile.TemporaryDirectory(prefix="probes-") as tmp:
        tiny = make_tiny_bert(Path(tmp) / "tiny-bert")
        for n, python in enumerate(pythons):
            commit = Probe(python, Path(tmp), tiny).python_code(Path(tmp), COMMIT)
            lines.append(f"# [{n}] benchharness at {commit}")
        for name, probe in probes.items():
            lines.append(name)
            for n, python in enumerate(pythons):
                scratch = Path(tmp) / f"{n}-{name.split()[0]}-{probe.__name__}"
                answer = probe(Probe(python, scratch, tiny))
                answer = answer.replace(str(scratch), "<tmp>").replace(tmp, "<tmp>").replace(str(ROOT.parent), "<work>")
                answer = " ".join(answer.split())
                lines.append(f"  [{n}] {answer if len(answer) <= WIDTH else answer[:WIDTH] + '...'}")
    report("reliability_probes", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
