"""A pass too large for memory goes to disk and gives the same scores: RowFile against a NumPy
array, the spill threshold, short writes and full disks, chunked encoding without a cache, and a
whole QQP run both ways."""

from __future__ import annotations

import errno
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from benchharness.evaluation import embeddings
from benchharness.evaluation.embeddings import DEFAULT_MEMORY_MIB, PassMemory, RowFile, SpillError, encode_pass
from tests.fakes import HashEncoder


def test_row_file_reads_and_writes_like_an_array(tmp_path):
    rng = np.random.default_rng(0)
    reference = np.zeros((500, 7), np.float32)
    rows = RowFile(tmp_path / "v.f32", 500, 7)
    for _ in range(20):  # scattered writes, with runs of consecutive rows among them
        at = rng.choice(500, size=40, replace=False)
        at[:10] = np.arange(100, 110)
        values = rng.standard_normal((40, 7)).astype(np.float32)
        reference[at] = values
        rows[at] = values
    asked = rng.integers(0, 500, size=300)  # any order, duplicates
    np.testing.assert_array_equal(rows[asked], reference[asked])
    np.testing.assert_array_equal(rows[slice(37, 401)], reference[37:401])
    np.testing.assert_array_equal(np.concatenate(list(rows.blocks(64))), reference)
    with pytest.raises(IndexError):
        rows[np.array([500])]
    rows.close()


def test_a_pass_spills_to_a_file_only_above_the_budget_and_the_file_has_no_name(tmp_path):
    """The spill file is unlinked once open (so a killed run leaves nothing): the folder is empty
    while the pass holds its rows, and the rows read back."""
    with PassMemory(1000, memory_mib=1, folder=tmp_path) as memory:
        assert isinstance(memory.allocate(256), np.ndarray)  # 1000 x 256 x 4 bytes < 1 MiB
    with PassMemory(1000, memory_mib=0.5, folder=tmp_path) as memory:
        spilled = memory.allocate(256)
        assert isinstance(spilled, RowFile) and spilled.path.parent == tmp_path
        assert list(tmp_path.iterdir()) == []
        spilled[np.arange(1000)] = np.full((1000, 256), 1.5, np.float32)
        assert (spilled[slice(0, 1000)] == 1.5).all()
    assert list(tmp_path.iterdir()) == []


def test_short_writes_are_completed(tmp_path, monkeypatch):
    """pwrite may write part of what it is given: every byte is still written, in place."""
    real = os.pwrite
    sizes = []

    def short(fd, data, offset):
        sizes.append(len(data))
        return real(fd, memoryview(data).cast("B")[:100], offset)

    monkeypatch.setattr(os, "pwrite", short)
    rows = RowFile(tmp_path / "v.f32", 30, 5)
    values = np.arange(150, dtype=np.float32).reshape(30, 5)
    rows[np.arange(30)] = values
    assert sizes == list(range(600, 0, -100))  # 30 x 5 x 4 bytes, 100 at a time
    np.testing.assert_array_equal(rows[slice(0, 30)], values)
    rows.close()


@pytest.mark.parametrize("fault", ["enospc", "zero"])
def test_a_full_disk_fails_the_write_naming_the_file_and_the_cause(tmp_path, monkeypatch, fault):
    """A disk that takes 64 bytes, then refuses (ENOSPC) or writes nothing: one-line error naming the
    spill file and the OS error, never a silently zero row."""
    real, left = os.pwrite, [64]

    def full(fd, data, offset):
        if left[0] == 0:
            if fault == "enospc":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return 0
        done = real(fd, memoryview(data).cast("B")[: left[0]], offset)
        left[0] -= done
        return done

    monkeypatch.setattr(os, "pwrite", full)
    rows = RowFile.anonymous(tmp_path, 40, 4)
    with pytest.raises(SpillError) as caught:
        rows[np.arange(40)] = np.ones((40, 4), np.float32)
    rows.close()
    message = str(caught.value)
    assert str(tmp_path / "benchharness-pass-") in message and "\n" not in message
    assert ("No space left on device" if fault == "enospc" else "wrote 0 of 576 bytes") in message
    assert not isinstance(caught.value, OSError)  # the cache must not take it for a failure of its own


def test_a_spill_folder_that_cannot_be_used_falls_back_to_the_temporary_folder(tmp_path, monkeypatch, caplog):
    (tmp_path / "cache").write_text("a file, not a folder")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with (
        caplog.at_level(logging.WARNING, logger="benchharness.evaluation.embeddings"),
        PassMemory(10, memory_mib=1e-6, folder=tmp_path / "cache") as memory,
    ):
        assert memory.allocate(3).path.parent == tmp_path / "tmp"
    assert f"cannot spill this pass's vectors beside the cache in {tmp_path / 'cache'}" in caplog.text


def test_an_encoder_without_cache_encodes_a_large_pass_in_longest_first_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "LARGE_PASS", 10)
    monkeypatch.setattr(embeddings, "ENCODE_CHUNK", 4)
    texts = [f"sentence {'x' * (i % 7)} {i}" for i in range(23)]
    encoder = HashEncoder()
    with PassMemory(len(texts), memory_mib=1e-6, folder=tmp_path) as memory:
        vectors = encode_pass(encoder, texts, memory)
        np.testing.assert_array_equal(vectors[np.arange(23)], HashEncoder().encode(texts))
    assert [len(c) for c in encoder.calls] == [4, 4, 4, 4, 4, 3]
    lengths = [len(s) for call in encoder.calls for s in call]
    assert lengths == sorted(lengths, reverse=True)


def test_the_cli_default_is_the_library_default(capsys):
    from benchharness.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert f"(default {DEFAULT_MEMORY_MIB})" in " ".join(capsys.readouterr().out.split())


def _qqp_files(root, n_rows: int) -> None:
    rng = np.random.default_rng(3)
    lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
    for i in range(n_rows):
        dup = int(rng.random() < 0.3)
        lines.append(f"{i}\t{2 * i}\t{2 * i + 1}\tquestion {i % 997} about {i % 13}?\tanswer text {i}\t{dup}")
    (root / "qqp").mkdir(parents=True)
    (root / "qqp" / "quora_duplicate_questions.tsv").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("cached", [False, True])
def test_a_qqp_run_from_disk_scores_what_the_in_memory_run_scores(tmp_path, cached):
    """QQP embeds its corpus a block at a time (DOC_BLOCK shrunk to 1,000 here) from a pass held in a
    file: every metric and every per-query item equal the in-memory run's."""
    from benchharness.evaluation.evaluate import evaluate
    from benchharness.tasks import qqp

    _qqp_files(tmp_path / "data", 5000)
    qqp.DOC_BLOCK, old = 1000, qqp.DOC_BLOCK
    try:
        runs = [
            evaluate(
                HashEncoder(dim=16),
                [qqp.QQP()],
                data_dir=tmp_path / "data",
                verify_data=False,
                embedding_memory_mib=mib,
                cache_dir=tmp_path / f"cache-{mib}" if cached else None,
                intervals=False,
            )
            for mib in (DEFAULT_MEMORY_MIB, 0.01)
        ]
    finally:
        qqp.DOC_BLOCK = old
    memory, disk = (next(iter(r)) for r in runs)
    assert memory.metrics["n_corpus"] == 5000 and memory.metrics["n_queries"] > 100
    assert disk.metrics == memory.metrics


def test_a_spill_beside_a_full_cache_disk_moves_to_the_temporary_folder(tmp_path, monkeypatch, caplog):
    """The cache's disk takes 64 bytes of the pass, then refuses: the rows written so far and the
    rest go on in the temporary folder, and they read back whole."""
    for name in ("cache", "tmp"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    real, left = os.pwrite, [64]

    def full_cache_disk(fd, data, offset):
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / "cache")):
            return real(fd, data, offset)
        if left[0] == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done = real(fd, memoryview(data).cast("B")[: left[0]], offset)
        left[0] -= done
        return done

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to tell the two folders' files apart")
    monkeypatch.setattr(os, "pwrite", full_cache_disk)
    values = np.arange(40 * 4, dtype=np.float32).reshape(40, 4)
    with (
        caplog.at_level(logging.WARNING, logger="benchharness.evaluation.embeddings"),
        PassMemory(40, memory_mib=1e-6, folder=tmp_path / "cache") as memory,
    ):
        rows = memory.allocate(4)
        rows[np.arange(20)] = values[:20]
        rows[np.arange(20, 40)] = values[20:]
        np.testing.assert_array_equal(rows[slice(0, 40)], values)
        assert rows.path.parent == tmp_path / "tmp"
    assert f"the spill file in {tmp_path / 'cache'} has no room" in caplog.text
    assert f"moved to {tmp_path / 'tmp'}" in caplog.text
