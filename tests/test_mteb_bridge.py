"""The mteb bridge: encoder wrapper and its ModelMeta, run_task's record and offline error, export.

No network: offline flags are forced and mteb's result cache points at a temporary folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from tests.conftest import ROOT

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
mteb = pytest.importorskip("mteb")

from benchharness.cache import EmbeddingCache  # noqa: E402
from benchharness.mteb_bridge.export import EXPORTABLE, export_results, reason_not_exported  # noqa: E402
from benchharness.mteb_bridge.model import MtebEncoder, hub_base, mteb_name  # noqa: E402
from benchharness.mteb_bridge.run import MtebDataError, run_task  # noqa: E402
from tests.fakes import HashEncoder  # noqa: E402
from tests.mteb_memory import sts_task  # noqa: E402

FIRST = ["a cat sits", "dogs run fast", "the sky is blue", "rain falls", "a man sings"]
SECOND = ["a cat is sitting", "a dog runs", "blue skies", "snow melts", "someone cooks"]
GOLD = [4.5, 3.0, 3.5, 1.0, 0.5]


def test_model_meta_names_the_encoder_and_versions_it_by_identity():
    a, b = MtebEncoder(HashEncoder("hash", salt="a")), MtebEncoder(HashEncoder("hash", salt="b"))
    assert a.mteb_model_meta.name == "benchharness/hash"
    assert a.mteb_model_meta.revision == HashEncoder("hash", salt="a").identity
    assert a.mteb_model_meta.revision != b.mteb_model_meta.revision  # mteb's cache cannot mix them up
    assert mteb_name("hf:org/model?pooling=avg") == "benchharness/hf_org_model_pooling=avg"
    assert mteb_name("minilm-l6+whitening(fit=sts-unlabeled)").count("/") == 1


def test_hub_base_reads_the_base_of_composed_encoders():
    hub = {"family": "sentence-transformers", "model": "sentence-transformers/all-MiniLM-L6-v2"}
    assert hub_base({"postprocessor": "repal", "base": {"postprocessor": "whitening", "base": hub}}) == hub["model"]
    assert hub_base({"family": "hf", "model": "/work/main/runs/consert-l3/model"}) is None


def test_mteb_evaluate_runs_the_wrapper_and_matches_scipy():
    encoder = HashEncoder(dim=16)
    result = mteb.evaluate(MtebEncoder(encoder), sts_task("XBridge", FIRST, SECOND, GOLD), cache=None,
                           show_progress_bar=False, co2_tracker=False)
    a, b = encoder.encode(FIRST), encoder.encode(SECOND)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert result.task_results[0].get_score() == pytest.approx(stats.spearmanr(cos, GOLD)[0], abs=1e-9)


def test_encoding_goes_through_the_embedding_cache(tmp_path):
    cache = EmbeddingCache(tmp_path)
    first = HashEncoder(dim=16)
    run_task(first, sts_task("XCache", FIRST, SECOND, GOLD), cache=cache)
    assert sum(map(len, first.calls)) == len(set(FIRST + SECOND))
    assert (tmp_path / first.identity / "embeddings.sqlite").exists()
    again = HashEncoder(dim=16)
    record = run_task(again, sts_task("XCache", FIRST, SECOND, GOLD), cache=cache)
    assert again.calls == []  # everything served from the cache
    assert record.main_score == pytest.approx(run_task(HashEncoder(dim=16), sts_task("XCache", FIRST, SECOND,
                                                                                     GOLD)).main_score)


def test_record_carries_task_revision_version_and_every_score():
    record = run_task(HashEncoder(dim=16), sts_task("XRecord", FIRST, SECOND, GOLD))
    assert (record.task, record.mteb_task, record.dataset_revision) == ("mteb:XRecord", "XRecord", "NA")
    assert record.mteb_version == mteb.__version__
    assert record.main_metric == "cosine_spearman"
    assert record.main_score == pytest.approx(record.scores["test"][0]["cosine_spearman"] * 100)
    assert record.metrics["test/default/euclidean_pearson"] == pytest.approx(
        record.scores["test"][0]["euclidean_pearson"] * 100)
    assert record.protocol()["mteb_version"] == mteb.__version__


def test_offline_missing_dataset_names_dataset_and_revision():
    task = mteb.get_task("STS12")
    revision = "0" * 40  # a revision no cache holds
    task.metadata = task.metadata.model_copy(update={"dataset": {**task.metadata.dataset, "revision": revision}})
    with pytest.raises(MtebDataError) as err:
        run_task(HashEncoder(), task)
    assert "mteb/sts12-sts" in str(err.value) and revision in str(err.value) and "offline" in str(err.value)


def test_unknown_mteb_task_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown mteb task 'NoSuchTaskXYZ'"):
        run_task(HashEncoder(), "mteb:NoSuchTaskXYZ")


# --- export ----------------------------------------------------------------------------------------

def _stored(encoder: str, task: str) -> SimpleNamespace:
    return SimpleNamespace(**json.loads((ROOT / "results" / encoder / f"{task}.json").read_text()))


def test_export_is_loaded_by_mteb_result_cache(tmp_path):
    stored = [_stored("minilm-l6", t) for t in ("STS12", "STS16", "STSBenchmark", "SICKRelatedness", "MR")]
    report = export_results(stored, tmp_path / "results")
    assert [r["task"] for r in report.exported] == ["STS12", "STS16"]
    assert {r["task"]: r["reason"] for r in report.skipped} == {t: reason_not_exported(t)
                                                               for t in ("STSBenchmark", "SICKRelatedness", "MR")}
    revision = stored[0].encoder_identity["hash"]
    folder = tmp_path / "results" / "benchharness__minilm-l6" / revision
    assert sorted(p.name for p in folder.iterdir()) == ["STS12.json", "STS16.json", "model_meta.json"]

    cache = mteb.ResultCache(tmp_path)
    assert cache.get_models() == [("benchharness__minilm-l6", revision)]
    loaded = cache.load_task_result("STS12", "benchharness/minilm-l6", revision)
    assert loaded.get_score() == pytest.approx(stored[0].metrics["all.spearman"] / 100)
    assert loaded.dataset_revision == mteb.get_task("STS12").metadata.revision
    on_disk = mteb.TaskResult.from_disk(folder / "STS16.json")
    assert on_disk.scores["test"][0]["cosine_pearson"] == pytest.approx(stored[1].metrics["all.pearson"] / 100)
    results = cache.load_results(models=["benchharness/minilm-l6"])
    assert sorted(r.task_name for m in results.model_results for r in m.task_results) == ["STS12", "STS16"]


def test_export_refuses_a_result_stored_under_another_protocol(tmp_path):
    result = _stored("minilm-l6", "STS13")
    result.protocol = {**result.protocol, "variant": "senteval-supervised"}
    report = export_results([result], tmp_path)
    assert not report.exported and "senteval-supervised" in report.skipped[0]["reason"]


def test_export_of_an_mteb_run_result_round_trips(tmp_path):
    record = run_task(HashEncoder(dim=16), sts_task("XExport", FIRST, SECOND, GOLD))
    stored = SimpleNamespace(encoder="hash", task="mteb:STS12", metrics=record.metrics,
                             protocol={**record.protocol(), "mteb_task": "STS12", "dataset_revision": "rev0"},
                             encoder_identity={"hash": "abc123", "family": "hash"},
                             encoder_metadata={"similarity": "cosine"}, date="2026-11-22T10:00:00+00:00")
    export_results([stored], tmp_path / "results")
    loaded = mteb.ResultCache(tmp_path).load_task_result("STS12", "benchharness/hash", "abc123")
    assert loaded.dataset_revision == "rev0"
    assert loaded.get_score() == pytest.approx(record.main_score / 100)


def test_allow_list_is_the_protocol_equal_tasks():
    assert {t: EXPORTABLE[t].mteb_task for t in EXPORTABLE} == {
        "STS12": "STS12", "STS13": "STS13", "STS14": "STS14", "STS15": "STS15", "STS16": "STS16",
        "STSBenchmark-raw": "STSBenchmark"}
