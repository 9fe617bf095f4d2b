"""The embedding cache: exact keys, nothing re-encoded or rewritten on a rerun, damage quarantined,
a killed run resumes, concurrent runs share work, file modes, non-finite rows refused.

Vectors come from a fake encoder that is a pure function of the text (``fake_vector``), so what
the cache serves is checked against the encoder's own output computed without the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchharness.core.encoder import Encoder
from benchharness.evaluation.cache import DB_NAME, MAX_SMALL_CHUNKS, CachingEncoder, EmbeddingCache

HERE = Path(__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[3]
DIM = 8


def fake_vector(sentence: str) -> np.ndarray:
    """Eight float32s from the sentence's sha256; NaN for sentences that ask for it."""
    if "nan!" in sentence:
        return np.full(DIM, np.nan, dtype=np.float32)
    digest = np.frombuffer(hashlib.sha256(sentence.encode()).digest()[:DIM], dtype=np.uint8)
    return (digest.astype(np.float32) - 127.5) / 10


class FakeEncoder(Encoder):
    """Counts what it encodes; can sleep per call (to be killed or raced) and log to a file."""

    def __init__(self, sleep: float = 0.0, log: str | None = None) -> None:
        super().__init__("fake")
        self.sleep, self.log = sleep, log
        self.calls: list[list[str]] = []

    def encode(self, sentences):
        time.sleep(self.sleep)
        self.calls.append(list(sentences))
        if self.log:
            with open(self.log, "a") as fh:
                fh.write(json.dumps(list(sentences)) + "\n")
        return np.stack([fake_vector(s) for s in sentences]) if sentences else np.zeros((0, DIM), np.float32)

    def identity_info(self):
        return {"family": "fake-sha256", "dim": DIM}

    @property
    def encoded(self) -> list[str]:
        return [s for call in self.calls for s in call]


def expected(sentences: list[str]) -> np.ndarray:
    return np.stack([fake_vector(s) for s in sentences])


def sentences(n: int, prefix: str = "sentence") -> list[str]:
    # lengths vary so that length ordering is visible
    return [f"{prefix} {i} " + "x" * (i % 7) for i in range(n)]


def nul_sentences(count: int, trailing: int = 1) -> list[str]:
    """Sentences whose sha1 digest ends in ``trailing`` NUL bytes (numpy S20 strips them on access)."""
    found, i = [], 0
    while len(found) < count:
        s = f"nul probe {i}"
        if hashlib.sha1(s.encode()).digest().endswith(b"\0" * trailing):
            found.append(s)
        i += 1
    return found


def db_path(root: Path) -> Path:
    return root / FakeEncoder().identity / DB_NAME


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def chunk_count(root: Path) -> int:
    con = sqlite3.connect(db_path(root))
    try:
        return con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    finally:
        con.close()


def test_keys_are_exact_for_digests_ending_in_nul_bytes(tmp_path):
    tricky = nul_sentences(3) + nul_sentences(1, trailing=2)
    assert all(hashlib.sha1(s.encode()).digest()[-1] == 0 for s in tricky)
    texts = tricky + sentences(5)
    first = FakeEncoder()
    np.testing.assert_array_equal(CachingEncoder(first, EmbeddingCache(tmp_path)).encode(texts), expected(texts))
    again = FakeEncoder()  # a new process: only the disk is shared
    wrapped = CachingEncoder(again, EmbeddingCache(tmp_path))
    np.testing.assert_array_equal(wrapped.encode(texts[::-1]), expected(texts[::-1]))
    assert again.calls == [] and wrapped.encoded == 0


def test_rerun_encodes_nothing_and_writes_nothing(tmp_path):
    texts = sentences(50)
    CachingEncoder(FakeEncoder(), EmbeddingCache(tmp_path)).encode(texts)
    before = snapshot(tmp_path)
    inner = FakeEncoder()
    wrapped = CachingEncoder(inner, EmbeddingCache(tmp_path))
    asked = texts[::3] + texts + texts[:4]  # duplicates and another order
    np.testing.assert_array_equal(wrapped.encode(asked), expected(asked))
    assert inner.calls == [] and wrapped.encoded == 0
    assert snapshot(tmp_path) == before


def test_missing_sentences_are_encoded_longest_first_in_committed_chunks(tmp_path):
    cache = EmbeddingCache(tmp_path)
    CachingEncoder(FakeEncoder(), cache).encode(["short", "a middling one"])
    texts = ["b", "a much longer sentence here", "short", "mid length", "cc", "a middling one", "dddd"]
    inner = FakeEncoder()
    wrapped = CachingEncoder(inner, cache, chunk_size=2)
    np.testing.assert_array_equal(wrapped.encode(texts), expected(texts))
    assert inner.calls == [["a much longer sentence here", "mid length"], ["dddd", "cc"], ["b"]]
    assert wrapped.encoded == 5
    assert chunk_count(tmp_path) == 1 + 3  # the first run's chunk and one commit per chunk encoded


def _damage(path: Path, how: str, marker: bytes) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "zeroed":
        path.write_bytes(bytes(len(data)))
    elif how == "flipped-vector":
        at = data.find(marker)  # inside a stored vector: only the crc32 can notice
        assert at >= 0
        data[at + 3] ^= 0x10
        path.write_bytes(bytes(data))
    elif how == "flipped-header":
        data[5] ^= 0xFF  # the "SQLite format 3" magic
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "empty", "zeroed", "flipped-vector", "flipped-header"])
def test_damaged_database_is_quarantined_and_re_encoded(tmp_path, how, caplog):
    texts = sentences(300)
    CachingEncoder(FakeEncoder(), EmbeddingCache(tmp_path), chunk_size=100).encode(texts)
    path = db_path(tmp_path)
    assert not path.with_name(DB_NAME + "-wal").exists()  # all committed into the main file
    _damage(path, how, fake_vector(texts[150]).tobytes())
    inner = FakeEncoder()
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        out = CachingEncoder(inner, EmbeddingCache(tmp_path)).encode(texts)
    assert [r.levelno for r in caplog.records] == [logging.WARNING] and str(path) in caplog.text
    np.testing.assert_array_equal(out, expected(texts))
    assert sorted(inner.encoded) == sorted(texts)
    quarantined = list((path.parent / "quarantine").iterdir())
    assert [p.name.split(".")[:2] for p in quarantined] == [["embeddings", "sqlite"]]
    third = FakeEncoder()  # repaired: the next run reuses everything
    CachingEncoder(third, EmbeddingCache(tmp_path)).encode(texts)
    assert third.calls == []


RUNNER = """
import json, sys
sys.path[:0] = [{root!r}, {tests!r}]
from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
from test_cache import FakeEncoder, sentences
inner = FakeEncoder(sleep={sleep}, log={log!r})
wrapped = CachingEncoder(inner, EmbeddingCache({cache!r}), chunk_size={chunk})
{wait}
out = wrapped.encode(sentences({n}))
print(json.dumps({{"encoded": wrapped.encoded, "sum": float(out.astype("float64").sum())}}))
"""


def _spawn(cache: Path, n: int, chunk: int, sleep: float, log: Path, wait: str = "") -> subprocess.Popen:
    script = RUNNER.format(
        root=str(ROOT), tests=str(HERE), sleep=sleep, log=str(log), cache=str(cache), chunk=chunk, n=n, wait=wait
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_killed_run_keeps_committed_chunks_and_rerun_resumes(tmp_path):
    texts = sentences(40)
    proc = _spawn(tmp_path, n=40, chunk=5, sleep=0.3, log=tmp_path / "log")
    cache = EmbeddingCache(tmp_path)
    deadline = time.time() + 120
    while len(cache.lookup(FakeEncoder().identity)) < 10:
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, "the encoding subprocess committed nothing"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = len(cache.lookup(FakeEncoder().identity))
    assert 10 <= kept < 40 and kept % 5 == 0  # whole chunks only
    inner = FakeEncoder()
    np.testing.assert_array_equal(CachingEncoder(inner, cache).encode(texts), expected(texts))
    assert len(inner.encoded) == 40 - kept


def test_concurrent_runs_of_one_identity_encode_each_sentence_once(tmp_path):
    go = tmp_path / "go"
    wait = (
        f"import os, time\nopen({str(tmp_path)!r} + '/ready-' + str(os.getpid()), 'w').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)"
    )
    procs = [
        _spawn(tmp_path / "cache", n=30, chunk=5, sleep=0.2, log=tmp_path / f"log{i}", wait=wait) for i in range(2)
    ]
    deadline = time.time() + 120
    while len(list(tmp_path.glob("ready-*"))) < 2:
        assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs]
        assert time.time() < deadline
        time.sleep(0.05)
    go.touch()
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(r["encoded"] for r in reports) == [0, 30]
    total = float(expected(sentences(30)).astype("float64").sum())
    assert [r["sum"] for r in reports] == pytest.approx([total, total])


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_files_get_0666_less_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        cache = EmbeddingCache(tmp_path / "cache")
        CachingEncoder(FakeEncoder(), cache).encode(sentences(5))
        path = db_path(tmp_path / "cache")
        with cache.writer(FakeEncoder().identity) as writer:
            writer.add(["one more"], expected(["one more"]))
            wal_mode = path.with_name(DB_NAME + "-wal").stat().st_mode & 0o777
        modes = {p.name: p.stat().st_mode & 0o777 for p in path.parent.iterdir()}
    finally:
        os.umask(old)
    assert modes == {DB_NAME: 0o666 & ~umask, "lock": 0o666 & ~umask}
    assert wal_mode == 0o666 & ~umask
    assert path.parent.stat().st_mode & 0o777 == 0o777 & ~umask


def test_non_finite_rows_are_refused(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path)
    identity = FakeEncoder().identity
    with pytest.raises(ValueError, match="not finite"):
        cache.add(identity, ["a", "b"], np.array([[1.0] * DIM, [np.inf] + [0.0] * (DIM - 1)]))
    assert len(cache.lookup(identity)) == 0
    texts = ["fine", "nan! here", "also fine"]
    inner = FakeEncoder()
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        out = CachingEncoder(inner, cache).encode(texts)
    assert "1 sentence(s) encoded to non-finite vectors" in caplog.text
    assert np.isnan(out[1]).all()  # returned as the encoder gave it...
    np.testing.assert_array_equal(out[[0, 2]], expected(["fine", "also fine"]))
    assert set(cache.lookup(identity).index) == {hashlib.sha1(s.encode()).digest() for s in ("fine", "also fine")}
    again = FakeEncoder()  # ...and never served from the cache
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        CachingEncoder(again, cache).encode(texts)
    assert "1 sentence(s) encoded to non-finite vectors" in caplog.text
    assert again.calls == [["nan! here"]]


def test_small_chunks_are_compacted(tmp_path):
    texts = [f"run {i}" for i in range(12)]
    for i in range(12):  # each run adds one sentence: one small chunk per run
        CachingEncoder(FakeEncoder(), EmbeddingCache(tmp_path)).encode(texts[: i + 1])
    # runs 1-9 leave 9 small chunks (> MAX_SMALL_CHUNKS = 8), merged into 1; runs 10-12 add 3
    assert MAX_SMALL_CHUNKS == 8 and chunk_count(tmp_path) == 4
    inner = FakeEncoder()
    np.testing.assert_array_equal(CachingEncoder(inner, EmbeddingCache(tmp_path)).encode(texts), expected(texts))
    assert inner.calls == []


def test_rows_of_another_dimension_are_refused_naming_the_file(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cache.add("ident", ["a"], np.ones((1, 4)))
    with pytest.raises(ValueError, match=rf"{DB_NAME}.*dimension 3.*dimension 4"):
        cache.add("ident", ["b"], np.ones((1, 3)))


def test_a_cache_of_another_format_is_refused_not_quarantined(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cache.add("ident", ["a"], np.ones((1, 4)))
    path = tmp_path / "ident" / DB_NAME
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE name = 'format'")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match=rf"{path}.*format '99'"):
        cache.lookup("ident")
    assert path.exists() and not (path.parent / "quarantine").exists()


def test_chunks_give_the_batches_of_one_length_sorted_call(tmp_path):
    """The HF encoder batches each call with ``length_sorted_batches``; chunking the missing
    sentences must not change its batches when the batch size divides the chunk size."""
    from benchharness.core.encoder import length_sorted_batches

    class Batching(FakeEncoder):
        def __init__(self) -> None:
            super().__init__()
            self.batches: list[list[str]] = []

        def encode(self, sentences):
            self.batches += [[sentences[i] for i in b] for b in length_sorted_batches([len(s) for s in sentences], 2)]
            return super().encode(sentences)

    texts = ["aa", "b", "cccc", "dd", "e", "ffff", "gg", "hhh", "i", "jjj", "kk"]  # many length ties
    one_call = [[texts[i] for i in b] for b in length_sorted_batches([len(s) for s in texts], 2)]
    inner = Batching()
    np.testing.assert_array_equal(
        CachingEncoder(inner, EmbeddingCache(tmp_path), chunk_size=4).encode(texts), expected(texts)
    )
    assert len(inner.calls) == 3 and inner.batches == one_call


def test_a_cache_that_cannot_be_read_is_left_for_the_run_with_one_warning(tmp_path, monkeypatch, caplog):
    """SQLite refusing to open the database (a read-only folder: 'unable to open database file') on
    the lookup: every call encodes without the cache, and the folder and cause are said once."""
    from benchharness.evaluation import cache as cache_module

    cache = EmbeddingCache(tmp_path)
    cache.add(FakeEncoder().identity, ["stored"], expected(["stored"]))

    def refuse(path):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(cache_module, "_connect", refuse)
    inner = FakeEncoder()
    encoder = CachingEncoder(inner, cache)
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        np.testing.assert_array_equal(encoder.encode(["stored", "new one"]), expected(["stored", "new one"]))
        np.testing.assert_array_equal(encoder.encode(["again"]), expected(["again"]))
    assert inner.calls == [["new one", "stored"], ["again"]]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        (
            f"fake: the embedding cache cannot be read ({tmp_path / inner.identity}: "
            "unable to open database file); this run goes on without it"
        )
    ]


def test_an_encoder_error_is_not_taken_for_a_cache_failure(tmp_path):
    """An OSError raised by the encoder itself (a missing file) is the encoder's: it propagates."""

    class Missing(FakeEncoder):
        def encode(self, sentences):
            raise FileNotFoundError("vectors.txt")

    with pytest.raises(FileNotFoundError, match=r"vectors\.txt"):
        CachingEncoder(Missing(), EmbeddingCache(tmp_path)).encode(["a"])


def test_a_foreign_write_lock_is_named_then_waited_for_up_to_its_bound(tmp_path, monkeypatch, caplog):
    """Another program's open write transaction: after LOCK_NOTICE_S the wait is logged naming the
    database; past BUSY_TIMEOUT_S the run goes on without the cache (bounds shrunk for the test)."""
    from benchharness.evaluation import cache as cache_module

    monkeypatch.setattr(cache_module, "LOCK_NOTICE_S", 0.2)
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.6)
    cache = EmbeddingCache(tmp_path)
    identity = FakeEncoder().identity
    cache.add(identity, ["stored"], expected(["stored"]))
    path = tmp_path / identity / DB_NAME
    foreign = sqlite3.connect(path, isolation_level=None)
    foreign.execute("BEGIN IMMEDIATE")
    try:
        inner = FakeEncoder()
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
            out = CachingEncoder(inner, cache).encode(["stored", "fresh"])
        waited = time.monotonic() - start
    finally:
        foreign.execute("ROLLBACK")
        foreign.close()
    np.testing.assert_array_equal(out, expected(["stored", "fresh"]))
    assert inner.calls == [["fresh"]] and 0.6 <= waited < 5
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == (
        f"embedding cache {path} is locked by another program's open write transaction; "
        "waiting up to 0.4 s for it, then going on without the cache"
    )
    assert "the embedding cache cannot be written" in messages[1] and "database is locked" in messages[1]
    assert len(messages) == 2
    assert len(cache.lookup(identity)) == 1  # "fresh" was not stored, "stored" still is


def test_a_lookup_behind_a_foreign_exclusive_lock_is_named(tmp_path, monkeypatch, caplog):
    """Another program in exclusive locking mode blocks even WAL readers: the lookup says which
    database it waits for after LOCK_NOTICE_S, and reads once the lock is gone."""
    from benchharness.evaluation import cache as cache_module

    monkeypatch.setattr(cache_module, "LOCK_NOTICE_S", 0.2)
    cache = EmbeddingCache(tmp_path)
    identity = FakeEncoder().identity
    cache.add(identity, ["stored"], expected(["stored"]))
    path = tmp_path / identity / DB_NAME
    hold = (
        f"import sqlite3, time\ncon = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "con.execute('PRAGMA locking_mode=EXCLUSIVE'); con.execute('BEGIN EXCLUSIVE')\n"
        "con.execute('SELECT COUNT(*) FROM chunks').fetchall(); print('held', flush=True); time.sleep(1.5)\n"
        "con.execute('ROLLBACK')"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
            rows = cache.lookup(identity)
    finally:
        holder.wait(timeout=60)
    assert len(rows) == 1
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"embedding cache {path} is locked by another program's open write transaction; waiting up to "
            f"{cache_module.BUSY_TIMEOUT_S - 0.2:g} s for it, then going on without the cache"
        )
    ]


def test_two_encoders_of_one_identity_say_a_failed_cache_folder_once(tmp_path, monkeypatch, caplog):
    """A base encoder under a post-processor and the same encoder on its own share one folder: one warning."""
    from benchharness.evaluation import cache as cache_module

    def refuse(path):
        raise sqlite3.OperationalError("unable to open database file")

    cache = EmbeddingCache(tmp_path)
    cache.add(FakeEncoder().identity, ["stored"], expected(["stored"]))
    monkeypatch.setattr(cache_module, "_connect", refuse)
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        for _ in range(2):
            np.testing.assert_array_equal(CachingEncoder(FakeEncoder(), cache).encode(["stored"]), expected(["stored"]))
    assert len(caplog.records) == 1 and "cannot be read" in caplog.records[0].getMessage()
