"""Encode-once data flow, contained failures, atomic results, overwrite strategies and the cache."""

import json

import numpy as np
import pytest

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.results import ResultStore
from benchharness.core.task import TaskProvider
from benchharness.evaluation.cache import CachingEncoder, EmbeddingCache
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.scoring.metrics import correlations, paired_cosine
from tests.fakes import BrokenTask, HashEncoder


@pytest.fixture
def broken_task(register_plugin):
    register_plugin("tasks", "broken", TaskProvider(tasks={"Broken": BrokenTask}))


def _run(data_dir, store, encoder, names, **kw):
    return run(
        [encoder.name], [tasks.get(n) for n in names], lambda _: encoder, DataRoot(data_dir), store, RunSettings(**kw)
    )


def test_each_unique_sentence_encoded_once_and_scores_correct(data_dir, tmp_path):
    enc = HashEncoder()
    store = ResultStore(tmp_path)
    summary = _run(data_dir, store, enc, ["STSBenchmark", "STSBenchmark-dev", "SICKRelatedness-trial"])
    assert [o.status for o in summary.outcomes] == ["computed"] * 3
    assert len(enc.calls) == 1  # one encoding pass for all tasks
    encoded = enc.calls[0]
    assert len(encoded) == len(set(encoded))
    expected = set()
    for name in ("STSBenchmark", "STSBenchmark-dev", "SICKRelatedness-trial"):
        t = tasks.get(name)
        t.load(DataRoot(data_dir))
        expected |= set(t.sentences())
    assert set(encoded) == expected
    # main score recomputed independently from the encoder and the raw pairs
    t = tasks.get("STSBenchmark")
    t.load(DataRoot(data_dir))
    a, b, gold = t.subsets["test"]
    want = correlations(paired_cosine(enc.encode(a), enc.encode(b)), gold)["spearman"]
    stored = json.loads(store.path("hash", "STSBenchmark").read_text())
    assert stored["main_score"] == pytest.approx(want, abs=1e-9)
    for key in (
        "encoder",
        "task",
        "main_score",
        "metrics",
        "protocol",
        "encoder_identity",
        "data",
        "versions",
        "seed",
        "timings",
        "date",
    ):
        assert key in stored
    assert stored["data"]["sha256"] and stored["versions"]["torch"]


def test_failed_task_does_not_sink_the_others(data_dir, tmp_path, broken_task):
    store = ResultStore(tmp_path)
    summary = _run(data_dir, store, HashEncoder(), ["Broken", "STSBenchmark"])
    status = {o.task: o.status for o in summary.outcomes}
    assert status == {"Broken": "failed", "STSBenchmark": "computed"}
    assert "boom" in summary.failed[0].message
    assert store.path("hash", "STSBenchmark").exists() and not store.path("hash", "Broken").exists()


def test_missing_data_fails_only_that_task(tmp_path, data_dir):
    root = tmp_path / "data"
    (root / "senteval/STS/STSBenchmark").mkdir(parents=True)
    src = data_dir / "senteval/STS/STSBenchmark/sts-test.csv"
    (root / "senteval/STS/STSBenchmark/sts-test.csv").write_bytes(src.read_bytes())
    summary = _run(root, ResultStore(tmp_path / "r"), HashEncoder(), ["SICKRelatedness", "STSBenchmark"])
    status = {o.task: o.status for o in summary.outcomes}
    assert status == {"SICKRelatedness": "failed", "STSBenchmark": "computed"}


def test_overwrite_strategies(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    first = store.path("hash", "STSBenchmark").read_text()

    rerun = HashEncoder()
    summary = _run(data_dir, store, rerun, ["STSBenchmark"])
    assert summary.outcomes[0].status == "reused" and rerun.calls == []

    changed = HashEncoder(salt="other")  # same name, different identity: even "reuse" recomputes it
    summary = _run(data_dir, store, changed, ["STSBenchmark"], overwrite="reuse")
    assert summary.outcomes[0].status == "computed" and changed.calls
    assert store.path("hash", "STSBenchmark").read_text() != first
    assert json.loads(store.path("hash", "STSBenchmark").read_text())["encoder_identity"]["salt"] == "other"

    summary = _run(data_dir, store, changed, ["STSBenchmark"], overwrite="stale")
    assert summary.outcomes[0].status == "reused"
    summary = _run(data_dir, store, changed, ["STSBenchmark"], overwrite="always")
    assert summary.outcomes[0].status == "computed"


def test_corrupt_result_file_is_recomputed_and_no_temp_files_remain(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    path = store.path("hash", "STSBenchmark")
    path.parent.mkdir(parents=True)
    path.write_text("{ half a file")
    summary = _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    assert summary.outcomes[0].status == "computed"
    assert json.loads(path.read_text())["task"] == "STSBenchmark"
    # the result and its per-item outputs, and no temporary file
    assert sorted(p.name for p in path.parent.iterdir()) == ["STSBenchmark.items.npz", "STSBenchmark.json"]


def test_embedding_cache_encodes_only_what_it_lacks(tmp_path):
    cache = EmbeddingCache(tmp_path)
    inner = HashEncoder()
    first = CachingEncoder(inner, cache).encode(["a", "b", "a"])
    assert inner.calls == [["a", "b"]]
    second_inner = HashEncoder()  # a new process: only the disk cache is shared
    again = CachingEncoder(second_inner, cache).encode(["b", "c", "a"])
    assert second_inner.calls == [["c"]]
    np.testing.assert_array_equal(again[[0, 2]], first[[1, 0]])
    other = HashEncoder(salt="x")  # different identity: nothing shared
    CachingEncoder(other, cache).encode(["a"])
    assert other.calls == [["a"]]


def test_result_files_carry_a_schema_version_and_old_files_load_as_version_1(data_dir, tmp_path):
    from pathlib import Path

    from benchharness.core.results import SCHEMA_VERSION, read_result

    store = ResultStore(tmp_path)
    _run(data_dir, store, HashEncoder(), ["STSBenchmark"])
    text = store.path("hash", "STSBenchmark").read_text()
    stored = json.loads(text)
    assert list(stored)[-1] == "schema_version" and stored["schema_version"] == SCHEMA_VERSION == 2
    assert text == json.dumps(stored, indent=2) + "\n"  # the layout of version 1 files, one key more
    # a file written before the key existed: a committed result without it
    committed = json.loads((Path(__file__).resolve().parents[3] / "results" / "glove-50d" / "STS12.json").read_text())
    committed.pop("schema_version", None)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(committed, indent=2) + "\n")
    assert read_result(old).schema_version == 1


def test_a_result_that_cannot_be_stored_fails_alone(data_dir, tmp_path, register_plugin):
    class NaNTask(BrokenTask):
        def evaluate(self, embed, seed):
            return {"x": float("nan")}

    register_plugin("tasks", "broken", TaskProvider(tasks={"Broken": NaNTask}))
    store = ResultStore(tmp_path)
    summary = _run(data_dir, store, HashEncoder(), ["Broken", "STSBenchmark"])
    status = {o.task: o.status for o in summary.outcomes}
    assert status == {"Broken": "failed", "STSBenchmark": "computed"}
    assert "x = nan" in summary.failed[0].message and not store.path("hash", "Broken").exists()
