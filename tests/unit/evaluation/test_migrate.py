"""``benchharness data migrate`` (``evaluation/migrate.py``): old npz cache shards imported with their
NUL-ending keys, damaged shards quarantined, legacy result folders renamed to their one-to-one slug;
and a cache lookup no longer touches old shards (the migration is the only way in)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from test_cache import FakeEncoder, expected, fake_vector, nul_sentences, sentences

from benchharness.cli import main
from benchharness.core.results import Result, ResultStore
from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
from benchharness.evaluation.migrate import migrate


def _old_shard(folder: Path, texts: list[str], name: str) -> Path:
    """A shard in the npz layout of the old cache: keys as numpy S20, vectors float32."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = np.frombuffer(b"".join(hashlib.sha1(s.encode()).digest() for s in texts), dtype="S20")
    path = folder / name
    with open(path, "wb") as fh:
        np.savez(fh, keys=keys, vectors=expected(texts))
    return path


def _result(encoder: str, task: str, score: float) -> Result:
    return Result(
        encoder=encoder,
        task=task,
        main_score=score,
        main_metric="spearman",
        metrics={"spearman": score},
        protocol={"variant": "v"},
        encoder_identity={"hash": encoder},
        encoder_metadata={},
        data={"sha256": "d", "root": "", "files": [], "verified": True},
        seed=1111,
        timings={},
        versions={},
        date="today",
    )


def _write_legacy(root: Path, folder: str, result: Result) -> Path:
    path = root / folder / f"{result.task}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_dict()))
    return path


def test_a_lookup_leaves_old_shards_alone_until_migrated(tmp_path):
    folder = tmp_path / FakeEncoder().identity
    old = nul_sentences(2) + sentences(20)
    _old_shard(folder, old[:10], "shard-00000.npz")
    _old_shard(folder, old[10:], "shard-00001.npz")
    assert len(EmbeddingCache(tmp_path).lookup(FakeEncoder().identity)) == 0
    assert len(list(folder.glob("shard-*.npz"))) == 2

    report = migrate(None, tmp_path)
    assert report.imported_rows == {FakeEncoder().identity: 22}
    assert not list(folder.glob("shard-*.npz"))
    texts = old + ["new one"]
    inner = FakeEncoder()
    np.testing.assert_array_equal(CachingEncoder(inner, EmbeddingCache(tmp_path)).encode(texts), expected(texts))
    assert inner.calls == [["new one"]]  # the NUL-ending keys came back whole
    assert migrate(None, tmp_path).imported_rows == {}  # once


@pytest.mark.parametrize("how", ["truncated", "bit-flipped", "empty"])
def test_a_damaged_old_shard_is_quarantined_by_name(tmp_path, how, caplog):
    folder = tmp_path / FakeEncoder().identity
    good, bad = sentences(10, "good"), sentences(10, "bad")
    _old_shard(folder, good, "shard-00000.npz")
    shard = _old_shard(folder, bad, "shard-00001.npz")
    data = bytearray(shard.read_bytes())
    if how == "truncated":
        data = data[: len(data) - 100]
    elif how == "empty":
        data = bytearray()
    else:
        data[data.find(fake_vector(bad[4]).tobytes())] ^= 0x01
    shard.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        report = migrate(None, tmp_path)
    assert "shard-00001.npz" in caplog.text
    assert report.imported_rows == {FakeEncoder().identity: 10}
    assert [p.name.split(".")[0] for p in (folder / "quarantine").iterdir()] == ["shard-00001"]
    inner = FakeEncoder()
    np.testing.assert_array_equal(
        CachingEncoder(inner, EmbeddingCache(tmp_path)).encode(good + bad), expected(good + bad)
    )
    assert sorted(inner.encoded) == sorted(bad)


def test_legacy_result_folders_are_renamed_and_shared_ones_kept(tmp_path):
    spec = "hf:sentence-transformers/all-MiniLM-L6-v2"
    _write_legacy(tmp_path, "hf_sentence-transformers_all-MiniLM-L6-v2", _result(spec, "STS12", 70.0))
    (tmp_path / "hf_sentence-transformers_all-MiniLM-L6-v2" / "STS12.items.npz").write_bytes(b"items")
    # two specs whose legacy folder was one and the same: which owns it cannot be told
    _write_legacy(tmp_path, "st_a_b", _result("st:a/b", "STS12", 1.0))
    _write_legacy(tmp_path, "st_a_b", _result("st:a:b", "STS13", 2.0))
    ResultStore(tmp_path).save(_result("glove-50d", "STS12", 50.0))  # the current layout: untouched

    report = migrate(tmp_path, None)

    store = ResultStore(tmp_path)
    new = store.path(spec, "STS12").parent
    assert report.renamed == [("hf_sentence-transformers_all-MiniLM-L6-v2", new.name)]
    assert new.name.startswith("hf_sentence-transformers_all-MiniLM-L6-v2@")
    assert store.load(spec, "STS12").main_score == 70.0
    assert (new / "STS12.items.npz").read_bytes() == b"items"  # per-item files move with their results
    assert report.kept == [("st_a_b", "holds results of 2 encoders: st:a/b, st:a:b")]
    assert sorted(p.name for p in (tmp_path / "st_a_b").iterdir()) == ["STS12.json", "STS13.json"]
    assert store.load("glove-50d", "STS12").main_score == 50.0
    assert migrate(tmp_path, None).renamed == []


def test_a_legacy_folder_is_not_renamed_onto_an_existing_one(tmp_path):
    spec = "st:org/model"
    _write_legacy(tmp_path, "st_org_model", _result(spec, "STS12", 1.0))
    ResultStore(tmp_path).save(_result(spec, "STS13", 2.0))
    report = migrate(tmp_path, None)
    assert report.renamed == [] and report.kept[0][0] == "st_org_model"
    assert (tmp_path / "st_org_model" / "STS12.json").is_file()


def test_the_command_migrates_both_and_says_what_moved(tmp_path, capsys):
    _old_shard(tmp_path / "cache" / "abcd", sentences(3), "shard-00000.npz")
    _write_legacy(tmp_path / "results", "st_org_model", _result("st:org/model", "STS12", 1.0))
    assert (
        main(["data", "migrate", "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "results")])
        == 0
    )
    out = capsys.readouterr().out
    assert f"embedding cache {tmp_path / 'cache' / 'abcd'}: imported 3 rows of old shards" in out
    assert "results st_org_model/ -> st_org_model@" in out
    assert (
        main(["data", "migrate", "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "results")])
        == 0
    )
    assert capsys.readouterr().out == "nothing to migrate\n"
