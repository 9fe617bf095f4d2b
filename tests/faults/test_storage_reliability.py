"""Storage under stress, through real ``benchharness`` processes: a spill file on a full disk, a
short ``pwrite``, a run killed while its pass is spilled, a read-only cache, another program's
SQLite write lock, and what the run says about the cache (its log line, one progress bar).

Faults of the file system are injected into the child process by a small wrapper
(``python -c``) that replaces ``os.pwrite``, which only the spill file uses; mounts are used only
where this machine allows them (root), and otherwise the test makes the cache read-only with
``chmod`` (which root would bypass). Expected scores come from a clean run of the same command,
and sentence counts straight from the csv files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import DATA, HF_CACHE, ROOT, needs_data

DEV = "senteval/STS/STSBenchmark/sts-dev.csv"
TEST = "senteval/STS/STSBenchmark/sts-test.csv"
PLUGIN = ROOT / "tests" / "faults_plugin.py"
HASH = "faults-hash:8"

pytestmark = needs_data(DEV, TEST)

#: the command line with ``os.pwrite`` writing at most SPILL_STEP bytes a call, and refusing with
#: ENOSPC once SPILL_QUOTA bytes are written (a disk that fills up)
PWRITE_WRAPPER = """
import errno, os, sys
step, left = int(os.environ["SPILL_STEP"]), [int(os.environ.get("SPILL_QUOTA", "-1"))]
real = os.pwrite
def pwrite(fd, data, offset):
    if left[0] == 0:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    size = step if left[0] < 0 else min(step, left[0])
    done = real(fd, memoryview(data).cast("B")[:size], offset)
    if left[0] > 0:
        left[0] -= done
    return done
os.pwrite = pwrite
from benchharness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def unique_sentences(*rels: str) -> list[str]:
    """The distinct sentences of STS-B files as SentEval reads them (columns 5 and 6, whitespace re-joined)."""
    out: dict[str, None] = {}
    for rel in rels:
        for line in (DATA / rel).read_text(encoding="utf8").splitlines():
            fields = line.strip().split("\t")
            out.update(dict.fromkeys([" ".join(fields[5].split()), " ".join(fields[6].split())]))
    return list(out)


def make_project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "benchharness.toml").write_text(
        f'[paths]\ndata_dir = "{DATA}"\nresults_dir = "results"\ncache_dir = "cache"\n'
        f'hf_hub_cache = "{HF_CACHE}"\nhf_offline = true\n'
    )
    (folder / "tmp").mkdir()
    return folder


def environment(project: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAULTS_", "SPILL_"))}
    return {**env, "PYTHONPATH": str(ROOT), "BENCHHARNESS_DATA": str(DATA), "TMPDIR": str(project / "tmp"), **extra}


def cli(
    project: Path, *args: str, head: tuple[str, ...] = ("-m", "benchharness.cli"), timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *head, *args],
        cwd=project,
        env=environment(project, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def score(project: Path, encoder: str, task: str, results: str = "results") -> float:
    found = list((project / results).rglob(f"{task}.json"))
    assert len(found) == 1, found
    stored = json.loads(found[0].read_text())
    assert stored["encoder"] == encoder
    return stored["main_score"]


GLOVE_DEV = ("run", "--encoders", "glove-50d", "--tasks", "STSBenchmark-dev", "--no-cache")


# --- the spill file -----------------------------------------------------------------------------


def test_a_spill_on_a_full_disk_fails_the_pass_naming_the_file_and_stores_nothing(tmp_path):
    """A disk that takes 64 KiB of the pass's 580 KiB: the old run stored a score computed from
    zero rows; now the pass fails, one line naming the spill file and ENOSPC."""
    project = make_project(tmp_path / "p")
    done = cli(
        project,
        *GLOVE_DEV,
        "--embedding-memory",
        "0.01",
        head=("-c", PWRITE_WRAPPER),
        SPILL_STEP=str(1 << 30),
        SPILL_QUOTA=str(64 * 1024),
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| glove-50d"))
    assert "failed" in row and f"spill file {project / 'tmp'}/benchharness-pass-" in row
    assert "No space left on device" in row
    assert not (project / "results").exists() or not list((project / "results").rglob("*.json"))
    assert list((project / "tmp").iterdir()) == []


def test_a_spill_written_in_short_writes_scores_what_memory_scores(tmp_path):
    """``pwrite`` writing 4 KiB a call (as it may): every row reaches the file, so the spilled
    pass scores exactly what the in-memory pass scores."""
    project = make_project(tmp_path / "p")
    in_memory = cli(project, *GLOVE_DEV, "--results-dir", "memory")
    assert in_memory.returncode == 0, in_memory.stderr
    spilled = cli(
        project,
        *GLOVE_DEV,
        "--results-dir",
        "spilled",
        "--embedding-memory",
        "0.01",
        head=("-c", PWRITE_WRAPPER),
        SPILL_STEP="4096",
    )
    assert spilled.returncode == 0, spilled.stderr
    assert score(project, "glove-50d", "STSBenchmark-dev", "spilled") == score(
        project, "glove-50d", "STSBenchmark-dev", "memory"
    )


def test_a_run_killed_while_its_pass_is_spilled_leaves_no_spill_file(tmp_path):
    """SIGKILL after the first cache commit of a spilled pass: neither the cache folder nor the
    temporary folder keeps a spill file (it has no name once open)."""
    project = make_project(tmp_path / "p")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(PLUGIN),
            "run",
            "--encoders",
            HASH,
            "--tasks",
            "STSBenchmark",
            "--embedding-memory",
            "0.01",
        ],
        cwd=project,
        start_new_session=True,
        env=environment(project, FAULTS_ENCODE_DELAY="4"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        while not _committed(project) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None and _committed(project), "no chunk committed while the run was alive"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    left = [
        p
        for p in [*(project / "cache").rglob("*"), *(project / "tmp").rglob("*")]
        if "benchharness-pass" in str(p) or p.suffix == ".f32"
    ]
    assert left == []


def _committed(project: Path) -> bool:
    for db in (project / "cache").glob("*/embeddings.sqlite"):
        with contextlib.suppress(sqlite3.Error):
            con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                return bool(con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
            finally:
                con.close()
    return False


# --- the embedding cache ------------------------------------------------------------------------


@contextlib.contextmanager
def read_only(folder: Path):
    """``folder`` read-only for this process and its children: a read-only bind mount over itself
    as root (which ignores permissions), else ``chmod -R a-w``; skips where neither works."""
    if os.geteuid() == 0:
        mounted = subprocess.run(
            ["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True, check=False
        )
        if mounted.returncode != 0:
            pytest.skip(f"cannot bind-mount read-only here: {mounted.stderr.decode().strip()}")
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, check=False)
            yield
        finally:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
        return
    modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
    for path, mode in modes.items():
        path.chmod(mode & ~0o222)
    try:
        yield
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def test_a_read_only_cache_is_left_for_the_run_with_one_warning(tmp_path):
    """Every vector cached, the cache folder then read-only: the rerun scores as the first run,
    warning once with the folder and the cause (it ended with a traceback from the lookup)."""
    project = make_project(tmp_path / "p")
    first = cli(project, "run", "--encoders", "glove-50d", "--tasks", "STSBenchmark-dev")
    assert first.returncode == 0, first.stderr
    [folder] = [db.parent for db in (project / "cache").glob("*/embeddings.sqlite")]
    with read_only(project / "cache"):
        again = cli(project, "run", "--encoders", "glove-50d", "--tasks", "STSBenchmark-dev", "--results-dir", "again")
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    warnings = [line for line in again.stderr.splitlines() if "embedding cache cannot be" in line]
    assert len(warnings) == 1 and f"({folder}: " in warnings[0] and "goes on without it" in warnings[0], warnings
    assert score(project, "glove-50d", "STSBenchmark-dev", "again") == score(project, "glove-50d", "STSBenchmark-dev")


def test_a_foreign_write_lock_is_named_while_the_run_waits_for_it(tmp_path):
    """Another program holds the database's write lock for 5 s: the run says which database it
    waits for (it waited in silence), then stores its rows once the lock is gone."""
    project = make_project(tmp_path / "p")
    first = cli(project, "run", "--encoders", HASH, "--tasks", "STSBenchmark-dev", head=(str(PLUGIN),))
    assert first.returncode == 0, first.stderr
    [db] = (project / "cache").glob("*/embeddings.sqlite")
    hold = (
        f"import sqlite3, time\ncon = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "con.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(5)\ncon.execute('ROLLBACK')"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        run = cli(project, "run", "--encoders", HASH, "--tasks", "STSBenchmark-dev,STSBenchmark", head=(str(PLUGIN),))
    finally:
        holder.wait(timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"embedding cache {db} is locked by another program's open write transaction" in run.stderr
    con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT SUM(n) FROM chunks").fetchone()[0] == len(unique_sentences(DEV, TEST))
    finally:
        con.close()


def test_the_log_line_says_how_many_sentences_are_cached_and_how_many_encoded(tmp_path):
    project = make_project(tmp_path / "p")
    dev, both = len(unique_sentences(DEV)), len(unique_sentences(DEV, TEST))
    runs = [("STSBenchmark-dev", "r1"), ("STSBenchmark-dev", "r2"), ("STSBenchmark-dev,STSBenchmark", "r3")]
    lines = []
    for tasks, results in runs:
        done = cli(project, "run", "--encoders", HASH, "--tasks", tasks, "--results-dir", results, head=(str(PLUGIN),))
        assert done.returncode == 0, done.stderr
        lines.append(re.findall(r"\[faults-hash:8\] (.*)", done.stderr))
    assert f"encoding {dev:,} unique sentences for 1 task(s)" in lines[0]
    assert f"all {dev:,} unique sentences cached for 1 task(s)" in lines[1]
    assert f"encoding {both - dev:,} of {both:,} unique sentences ({dev:,} cached) for 2 task(s)" in lines[2]


def on_a_terminal(project: Path, *args: str) -> tuple[int, str]:
    """Exit status and standard error of ``benchharness ARGS`` whose standard error is a terminal
    (a pseudo-terminal): off one, the command line shows no progress bar."""
    import fcntl
    import pty
    import struct
    import termios

    main_fd, child_fd = pty.openpty()
    # a terminal of 24 x 160: a new pseudo-terminal is 0 x 0, which a bar fills with nothing
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchharness.cli", *args],
        cwd=project,
        env=environment(project),
        stdout=subprocess.DEVNULL,
        stderr=child_fd,
    )
    os.close(child_fd)
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main_fd)
    return proc.wait(300), b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_one_progress_bar_covers_a_pass_of_several_cache_chunks(tmp_path, tiny_bert):
    """STS-B test's 2,551 distinct sentences are two cache chunks: one bar counts them all (the
    encoder's own bar restarted for each chunk, 2048/2048 then 503/503). Every finished bar is read:
    tqdm may draw the finished bar a second time on a line of its own as it closes."""
    project = make_project(tmp_path / "p")
    total = len(unique_sentences(TEST))
    assert 2048 < total <= 4096
    status, stderr = on_a_terminal(
        project, "run", "--encoders", f"hf:{tiny_bert}?pooling=avg", "--tasks", "STSBenchmark"
    )
    assert status == 0, stderr
    finished = [line.split("\r")[-1] for line in stderr.splitlines() if "100%|" in line]
    counts = {line.split("|")[2].split("[")[0].strip() for line in finished}
    assert counts == {f"{total}/{total}"}, stderr[-3000:]
