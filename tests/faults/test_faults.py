"""Fault injection through real ``benchharness`` processes.

Each test runs the command line in a temporary project (its own ``benchharness.toml``, results
and embedding cache under ``tmp_path``) on the shared STS-B test file, and injects one fault: a
SIGKILL while encoding or while a result file is being written, a damaged cache database, two
runs at once, an encoder that yields NaN, invalid training flags. What a rerun must then do is
checked against values computed here, independently of the harness: the unique sentences and
gold scores read straight from the csv, and the expected Spearman from the fake encoder's
vectors and scipy.

The fake encoder (``tests/faults_plugin.py``, family ``faults-hash``) is a pure function of each
sentence, so a resumed run must give exactly the scores of an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchharness.core.results import ResultStore
from tests.fakes import HashEncoder
from tests.helpers import DATA, HF_CACHE, MINILM_L3, ROOT, needs_data

STSB = "senteval/STS/STSBenchmark/sts-test.csv"
PLUGIN = ROOT / "tests" / "faults_plugin.py"
ENCODER = "faults-hash:8"
CHUNK = 2048  # benchharness.evaluation.cache.ENCODE_CHUNK: a killed run keeps every chunk it committed

pytestmark = needs_data(STSB)


# --- independent expectations --------------------------------------------------------------


def stsb_pairs() -> tuple[list[str], list[str], list[float]]:
    """STS-B test as SentEval reads it: gold in column 4, sentences in 5 and 6, whitespace re-joined."""
    a, b, gold = [], [], []
    for line in (DATA / STSB).read_text(encoding="utf8").splitlines():
        fields = line.strip().split("\t")
        a.append(" ".join(fields[5].split()))
        b.append(" ".join(fields[6].split()))
        gold.append(float(fields[4]))
    return a, b, gold


def unique_sentences() -> list[str]:
    a, b, _ = stsb_pairs()
    return list(dict.fromkeys(s for pair in zip(a, b) for s in pair))


def expected_spearman(dim: int = 8) -> float:
    """Spearman (x100) of the fake encoder's cosines against the gold scores, via scipy."""
    from scipy.stats import spearmanr

    a, b, gold = stsb_pairs()
    enc = HashEncoder(dim=dim)
    u, v = enc.encode(a), enc.encode(b)
    cos = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    return 100 * float(spearmanr(cos, gold).statistic)


# --- running the command line --------------------------------------------------------------


def make_project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "benchharness.toml").write_text(
        "[paths]\n"
        f'data_dir = "{DATA}"\nresults_dir = "results"\ncache_dir = "cache"\nruns_dir = "runs"\n'
        f'hf_hub_cache = "{HF_CACHE}"\nhf_offline = true\n'
    )
    return folder


def command(*args: str, plugin: bool = True) -> list[str]:
    head = [sys.executable, str(PLUGIN)] if plugin else [sys.executable, "-m", "benchharness.cli"]
    return [*head, *args]


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTS_")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's code, not the editable install's
    env["BENCHHARNESS_DATA"] = str(DATA)
    return {**env, **extra}


def run_cli(
    project: Path, *args: str, plugin: bool = True, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args, plugin=plugin),
        cwd=project,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_cli(project: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(*args),
        cwd=project,
        env=environment(**env),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def wait_for(condition, timeout: float = 180, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def run_args(*tasks: str, results: str = "results") -> list[str]:
    return ["run", "--encoders", ENCODER, "--tasks", ",".join(tasks), "--quiet", "--results-dir", results]


def result(project: Path, task: str, results: str = "results") -> dict:
    return json.loads(ResultStore(project / results).path(ENCODER, f"{task}").read_text())


def database(project: Path) -> Path:
    found = list((project / "cache").glob("*/embeddings.sqlite"))
    assert len(found) <= 1, found
    return found[0] if found else project / "cache" / "none" / "embeddings.sqlite"


def committed_rows(db: Path) -> int:
    """Rows the cache database holds, read the way any SQLite client would."""
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT COALESCE(SUM(n), 0) FROM chunks").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError:  # created but its schema not committed yet
        return 0


# --- kill -9 ---------------------------------------------------------------------------------


def test_kill_during_encoding_then_rerun_encodes_only_the_uncommitted_rest(tmp_path):
    """SIGKILL between two cache commits: the rerun encodes only what the first run had not
    committed and scores exactly like an uninterrupted run."""
    project = make_project(tmp_path / "p")
    unique = len(unique_sentences())
    assert CHUNK < unique < 2 * CHUNK  # STS-B test: one full chunk, then the rest
    proc = start_cli(project, *run_args("STSBenchmark"), FAULTS_ENCODE_DELAY="4")
    try:
        wait_for(
            lambda: committed_rows(database(project)) > 0 or proc.poll() is not None, what="the first committed chunk"
        )
        assert proc.poll() is None, proc.communicate()
        kill(proc)
    finally:
        if proc.poll() is None:
            kill(proc)
    assert committed_rows(database(project)) == CHUNK
    assert not (project / "results").exists() or not list((project / "results").rglob("*.json"))

    rerun = run_cli(project, *run_args("STSBenchmark"))
    assert rerun.returncode == 0, rerun.stderr
    res = result(project, "STSBenchmark")
    assert res["timings"]["sentences_encoded_all_tasks"] == unique
    assert res["timings"]["sentences_not_from_cache"] == unique - CHUNK
    assert res["main_score"] == pytest.approx(expected_spearman(), abs=1e-9)


def test_kill_while_writing_a_result_then_rerun_reuses_the_written_one(tmp_path):
    """SIGKILL with the second result half-written: the first stays whole and is reused, the
    second is computed by the rerun, and the half-written file is never read as a result."""

    project = make_project(tmp_path / "p")
    marker = tmp_path / "hanging"
    tasks = ("STSBenchmark", "STSBenchmark-dev")
    proc = start_cli(project, *run_args(*tasks), FAULTS_HANG_AT_SAVE="2", FAULTS_HANG_MARKER=str(marker))
    try:
        wait_for(lambda: marker.exists() or proc.poll() is not None, what="the second result write")
        assert proc.poll() is None, proc.communicate()
        kill(proc)
    finally:
        if proc.poll() is None:
            kill(proc)
    folder = ResultStore(project / "results").path(ENCODER, "STSBenchmark").parent
    written = sorted(p.name for p in folder.glob("*.json"))
    assert len(written) == 1, written
    first = written[0].removesuffix(".json")
    json.loads((folder / written[0]).read_text())  # whole, not truncated
    # per-item outputs are written before their result (and linked from it by sha256): an items file
    # without its result is only overwritten by the rerun
    leftovers = [p.name for p in folder.iterdir() if not p.name.endswith((".json", ".items.npz"))]
    assert leftovers and all(p.startswith(".") and p.endswith(".tmp") for p in leftovers), leftovers
    before = result(project, first)

    rerun = run_cli(project, *run_args(*tasks))
    assert rerun.returncode == 0, rerun.stderr
    status = {
        line.split("|")[2].strip(): line.split("|")[3].strip()
        for line in rerun.stdout.splitlines()
        if line.startswith("| faults-hash")
    }
    second = next(t for t in tasks if t != first)
    assert status == {first: "reused", second: "computed"}
    assert result(project, first) == before
    stored = list(ResultStore(project / "results"))
    assert sorted(r.task for r in stored) == sorted(tasks)
    assert result(project, "STSBenchmark")["main_score"] == pytest.approx(expected_spearman(), abs=1e-9)


# --- a damaged cache -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """A finished run whose cache the damage tests copy and break."""
    project = make_project(tmp_path_factory.mktemp("baseline"))
    done = run_cli(project, *run_args("STSBenchmark"))
    assert done.returncode == 0, done.stderr
    db = database(project)
    assert db.exists() and not db.with_name(db.name + "-wal").exists()  # checkpointed on close
    return project


def _truncate(db: Path) -> None:
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])


def _empty(db: Path) -> None:
    db.write_bytes(b"")


def _zero(db: Path) -> None:
    db.write_bytes(bytes(db.stat().st_size))


def _flip(db: Path) -> None:
    """One bit of a stored vector: found by its bytes, which the fake encoder lets us compute."""
    blob = bytearray(db.read_bytes())
    row = HashEncoder(dim=8).encode([unique_sentences()[0]])[0].astype(np.float32).tobytes()
    at = blob.find(row)
    assert at >= 0 and blob.find(row, at + 1) < 0
    blob[at + 5] ^= 0x10
    db.write_bytes(bytes(blob))


@pytest.mark.parametrize("damage", [_truncate, _empty, _zero, _flip], ids=["truncated", "empty", "zeroed", "bit-flip"])
def test_damaged_cache_is_quarantined_and_the_run_recomputes_the_same_scores(baseline, tmp_path, damage):
    project = make_project(tmp_path / "p")
    shutil.copytree(baseline / "cache", project / "cache")
    db = database(project)
    damage(db)

    rerun = run_cli(project, *run_args("STSBenchmark"))
    assert rerun.returncode == 0, rerun.stderr
    quarantined = list((db.parent / "quarantine").iterdir())
    assert [p.name.startswith("embeddings.sqlite.") for p in quarantined] == [True]
    assert str(db) in rerun.stderr and str(quarantined[0]) in rerun.stderr, rerun.stderr
    res, first = result(project, "STSBenchmark"), result(baseline, "STSBenchmark")
    assert res["main_score"] == first["main_score"] and res["metrics"] == first["metrics"]
    assert res["timings"]["sentences_not_from_cache"] == len(unique_sentences())


# --- two runs at once ------------------------------------------------------------------------


def test_concurrent_runs_encode_each_sentence_once(tmp_path):
    """Two runs sharing a cache (separate results folders): the cache lock makes the later one
    wait and reuse, so together they encode the unique sentences once, and agree."""
    project = make_project(tmp_path / "p")
    procs = [
        start_cli(project, *run_args("STSBenchmark", results=f"results{i}"), FAULTS_ENCODE_DELAY="1") for i in (1, 2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    runs = [result(project, "STSBenchmark", results=f"results{i}") for i in (1, 2)]
    assert sum(r["timings"]["sentences_not_from_cache"] for r in runs) == len(unique_sentences())
    assert runs[0]["metrics"] == runs[1]["metrics"]
    assert runs[0]["main_score"] == pytest.approx(expected_spearman(), abs=1e-9)


# --- an encoder that yields NaN --------------------------------------------------------------


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_nan_vectors_fail_the_task_naming_encoder_and_rows(tmp_path, cache):
    """A GloVe-format file where one word's vector holds ``nan``: every sentence with that word
    encodes to NaN. The run must fail, say which encoder and how many rows, and store nothing."""
    sentences = unique_sentences()
    vocab = list(dict.fromkeys(w for s in sentences for w in s.lower().split()))
    poisoned = "man"
    rng = np.random.default_rng(0)
    lines = []
    for word in vocab:
        values = [f"{x:.5f}" for x in rng.normal(size=4)]
        if word == poisoned:
            values[2] = "nan"
        lines.append(" ".join([word, *values]))
    vectors = tmp_path / "poisoned-vectors.txt"
    vectors.write_text("\n".join(lines) + "\n", encoding="utf8")
    n_rows = sum(poisoned in s.lower().split() for s in sentences)
    assert 10 < n_rows < len(sentences) // 2

    project = make_project(tmp_path / "p")
    encoder = f"glove:{vectors}"
    args = ["run", "--encoders", encoder, "--tasks", "STSBenchmark", "--quiet", *([] if cache else ["--no-cache"])]
    done = run_cli(project, *args, plugin=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert not list((project / "results").rglob("*.json")) if (project / "results").exists() else True
    assert any(encoder in line and re.search(rf"\b{n_rows}\b", line) for line in output.splitlines()), output


# --- invalid training flags ------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag", [["--max-steps", "0"], ["--limit", "0"], ["--eval-every", "-5"]], ids=["max-steps", "limit", "eval-every"]
)
def test_bad_training_flag_exits_2_before_any_model_loads(tmp_path, flag):
    """The flag is refused with status 2 and a message naming it, before the base model is
    loaded: no BERT modelling code is imported (``-X importtime`` lists every import) and no
    run folder appears."""
    project = make_project(tmp_path / "p")
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "benchharness.cli",
        "train",
        "consert",
        "--base",
        MINILM_L3,
        "--out",
        str(out),
        "--device",
        "cpu",
        "--quiet",
        *flag,
    ]
    try:
        done = subprocess.run(cmd, cwd=project, env=environment(), capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`{' '.join(flag)}` was not refused: the run was still going after 120 s")
    messages = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 2, "\n".join(messages[-20:])
    assert any(flag[0] in line or flag[0][2:].replace("-", "_") in line for line in messages), messages[-20:]
    assert "modeling_bert" not in done.stderr
    assert not out.exists()
