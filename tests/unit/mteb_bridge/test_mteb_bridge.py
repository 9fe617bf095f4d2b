"""The mteb bridge: encoder wrapper and its ModelMeta, run_task's record and offline error, export.

No network: offline flags are forced and mteb's result cache points at a temporary folder.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from tests.helpers import MINILM_L6, ROOT, glove_cosines

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
mteb = pytest.importorskip("mteb")

from benchharness.evaluation.cache import EmbeddingCache  # noqa: E402
from benchharness.mteb_bridge.as_model import MtebEncoder, hub_base, mteb_name  # noqa: E402
from benchharness.mteb_bridge.evaluate import MtebDataError, run_task  # noqa: E402
from benchharness.mteb_bridge.export import EXPORTABLE, PROVENANCE, export_results, reason_not_exported  # noqa: E402
from benchharness.mteb_bridge.memory import sts_task  # noqa: E402
from tests.fakes import HashEncoder  # noqa: E402

FIRST = ["a cat sits", "dogs run fast", "the sky is blue", "rain falls", "a man sings"]
SECOND = ["a cat is sitting", "a dog runs", "blue skies", "snow melts", "someone cooks"]
GOLD = [4.5, 3.0, 3.5, 1.0, 0.5]


def test_model_meta_names_the_encoder_and_versions_it_by_identity():
    a, b = MtebEncoder(HashEncoder("hash", salt="a")), MtebEncoder(HashEncoder("hash", salt="b"))
    assert a.mteb_model_meta.name == "benchharness/hash"
    assert a.mteb_model_meta.revision == HashEncoder("hash", salt="a").identity
    assert a.mteb_model_meta.revision != b.mteb_model_meta.revision  # mteb's cache cannot mix them up
    assert mteb_name("hf:org/model?pooling=avg").startswith("benchharness/hf_org_model_pooling=avg")
    assert mteb_name("minilm-l6+whitening(fit=sts-unlabeled)").count("/") == 1


def test_hub_base_reads_the_base_of_composed_encoders():
    hub = {"family": "sentence-transformers", "model": "sentence-transformers/all-MiniLM-L6-v2"}
    assert hub_base({"postprocessor": "repal", "base": {"postprocessor": "whitening", "base": hub}}) == hub["model"]
    assert hub_base({"family": "hf", "model": "/work/main/runs/consert-l3/model"}) is None


def test_mteb_evaluate_runs_the_wrapper_and_matches_scipy():
    encoder = HashEncoder(dim=16)
    result = mteb.evaluate(
        MtebEncoder(encoder),
        sts_task("XBridge", FIRST, SECOND, GOLD),
        cache=None,
        show_progress_bar=False,
        co2_tracker=False,
    )
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
    assert record.main_score == pytest.approx(
        run_task(HashEncoder(dim=16), sts_task("XCache", FIRST, SECOND, GOLD)).main_score
    )


def test_record_carries_task_revision_version_and_every_score():
    record = run_task(HashEncoder(dim=16), sts_task("XRecord", FIRST, SECOND, GOLD))
    assert (record.task, record.mteb_task, record.dataset_revision) == ("mteb:XRecord", "XRecord", "NA")
    assert record.mteb_version == mteb.__version__
    assert record.main_metric == "cosine_spearman"
    assert record.main_score == pytest.approx(record.scores["test"][0]["cosine_spearman"] * 100)
    assert record.metrics["test/default/euclidean_pearson"] == pytest.approx(
        record.scores["test"][0]["euclidean_pearson"] * 100
    )
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
    report = export_results(stored, tmp_path)
    assert [r["task"] for r in report.exported] == ["STS12", "STS16"]
    assert {r["task"]: r["reason"] for r in report.skipped} == {
        t: reason_not_exported(t) for t in ("STSBenchmark", "SICKRelatedness", "MR")
    }
    # a sentence-transformers model used as published exports under its hub id and commit, beside
    # mteb's own rows for it
    revision = stored[0].encoder_identity["revision"]
    assert len(revision) == 40
    folder = tmp_path / "results" / "sentence-transformers__all-MiniLM-L6-v2" / revision
    assert sorted(p.name for p in folder.iterdir()) == ["STS12.json", "STS16.json", "benchharness", "model_meta.json"]
    meta = json.loads((folder / "model_meta.json").read_text())
    assert json.loads((folder / PROVENANCE).read_text())["encoder"] == "minilm-l6"
    # as mteb reads it to submit results: ModelMeta forbids keys it does not know
    assert (
        mteb.models.ModelMeta.model_validate_json_resolved((folder / "model_meta.json").read_text()).name == MINILM_L6
    )
    # a model mteb's registry knows: its metadata, at the revision that was run
    registered = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")
    for field in ("n_parameters", "embed_dim", "max_tokens", "license", "languages", "training_datasets"):
        value = getattr(registered, field)
        written = set(meta[field]) if isinstance(value, set) else meta[field]
        assert value is not None and written == value, field
    assert meta["revision"] == revision and meta["adapted_from"] is None
    from mteb.models import ModelMeta

    with warnings.catch_warnings():  # mteb's to_dict writes its deprecated is_cross_encoder; reading it warns
        warnings.simplefilter("ignore", DeprecationWarning)
        ModelMeta.model_validate({k: v for k, v in meta.items() if k != "benchharness"})  # mteb's own validation

    cache = mteb.ResultCache(tmp_path)
    assert cache.get_models() == [("sentence-transformers__all-MiniLM-L6-v2", revision)]
    loaded = cache.load_task_result("STS12", "sentence-transformers/all-MiniLM-L6-v2", revision)
    assert loaded.get_score() == pytest.approx(stored[0].metrics["all.spearman"] / 100)
    assert loaded.dataset_revision == mteb.get_task("STS12").metadata.revision
    on_disk = mteb.TaskResult.from_disk(folder / "STS16.json")
    assert on_disk.scores["test"][0]["cosine_pearson"] == pytest.approx(stored[1].metrics["all.pearson"] / 100)
    results = cache.load_results(models=["sentence-transformers/all-MiniLM-L6-v2"])
    assert sorted(r.task_name for m in results.model_results for r in m.task_results) == ["STS12", "STS16"]


def test_an_encoder_that_is_not_the_published_model_exports_under_its_own_name_with_the_reason(tmp_path):
    composed = _stored("minilm-l6+whitening", "STS12")
    export_results([composed], tmp_path)
    folder = tmp_path / "results" / "benchharness__minilm-l6+whitening" / composed.encoder_identity["hash"]
    meta = json.loads((folder / "model_meta.json").read_text())
    assert meta["name"] == "benchharness/minilm-l6+whitening"
    assert "post-processed" in json.loads((folder / PROVENANCE).read_text())["name_reason"]
    # adapted from the hub model it whitens; sentence-transformers computes, NumPy whitens
    assert meta["adapted_from"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["framework"] == ["Sentence Transformers", "PyTorch", "NumPy"]


def test_export_refuses_a_result_stored_under_another_protocol(tmp_path):
    result = _stored("minilm-l6", "STS13")
    result.protocol = {**result.protocol, "variant": "senteval-supervised"}
    report = export_results([result], tmp_path)
    assert not report.exported and "senteval-supervised" in report.skipped[0]["reason"]


def test_export_of_an_mteb_run_result_round_trips(tmp_path):
    record = run_task(HashEncoder(dim=16), sts_task("XExport", FIRST, SECOND, GOLD))
    stored = SimpleNamespace(
        encoder="hash",
        task="mteb:STS12",
        metrics=record.metrics,
        protocol={**record.protocol(), "mteb_task": "STS12", "dataset_revision": "rev0"},
        encoder_identity={"hash": "abc123", "family": "hash"},
        encoder_metadata={"similarity": "cosine"},
        date="2026-11-22T10:00:00+00:00",
    )
    export_results([stored], tmp_path)
    loaded = mteb.ResultCache(tmp_path).load_task_result("STS12", "benchharness/hash", "abc123")
    assert loaded.dataset_revision == "rev0"
    assert loaded.get_score() == pytest.approx(record.main_score / 100)


def test_allow_list_is_the_protocol_equal_tasks():
    assert {t: EXPORTABLE[t].mteb_task for t in EXPORTABLE} == {
        "STS12": "STS12",
        "STS13": "STS13",
        "STS14": "STS14",
        "STS15": "STS15",
        "STS16": "STS16",
        "STSBenchmark-raw": "STSBenchmark",
    }


# --- mteb tasks in `benchharness run`, the leaderboard and `benchharness export` ------------------------


@pytest.fixture
def in_memory_tasks(monkeypatch):
    """mteb task names resolve to in-memory tasks (``XRun``) or to a real mteb task whose dataset
    revision no cache holds (``STS12``); anything else is mteb's own lookup."""
    from benchharness.mteb_bridge import evaluate as bridge_run

    real = bridge_run.get_task

    def get_task(name):
        short = bridge_run.task_name(name)
        if short == "XRun":
            return sts_task("XRun", FIRST, SECOND, GOLD)
        if short == "STS12":
            task = real("STS12")
            task.metadata = task.metadata.model_copy(
                update={"dataset": {**task.metadata.dataset, "revision": "0" * 40}}
            )
            return task
        return real(name)

    monkeypatch.setattr(bridge_run, "get_task", get_task)


def test_tasks_resolve_accepts_mteb_names():
    from benchharness import tasks

    assert tasks.resolve("STS12, mteb:STS22 ,mteb:SciFact,mteb:STS22") == ["STS12", "mteb:STS22", "mteb:SciFact"]
    with pytest.raises(tasks.UnknownTaskError, match="mteb:<Name>"):
        tasks.resolve("mteb:")


def test_run_stores_an_mteb_task_and_the_leaderboard_shows_it(project, in_memory_tasks, capsys):
    from benchharness.cli import main

    assert main(["run", "--encoders", "glove-50d", "--tasks", "mteb:XRun,STSBenchmark", "--quiet"]) == 0
    stored = json.loads((project / "results" / "glove-50d" / "mteb:XRun.json").read_text())
    want = stats.spearmanr(glove_cosines(FIRST, SECOND), GOLD)[0] * 100  # no tied cosines among 5 pairs
    assert stored["main_score"] == pytest.approx(want, abs=1e-4)
    assert stored["main_metric"] == "cosine_spearman" and stored["task"] == "mteb:XRun"
    assert stored["metrics"]["test/default/cosine_pearson"] == pytest.approx(
        stats.pearsonr(glove_cosines(FIRST, SECOND), GOLD)[0] * 100, abs=1e-4
    )
    protocol = stored["protocol"]
    assert protocol["variant"] == f"mteb-{mteb.__version__}" and protocol["mteb_version"] == mteb.__version__
    assert (protocol["mteb_task"], protocol["dataset"], protocol["dataset_revision"]) == ("XRun", "NA", "NA")
    assert stored["data"]["files"] == ["hf://datasets/NA@NA"]
    # the encoder came through benchharness's embedding cache: every sentence of the task is in it
    from benchharness.evaluation.cache import EmbeddingCache

    cached = EmbeddingCache(project / ".cache").lookup(stored["encoder_identity"]["hash"])
    from benchharness.evaluation.cache import sentence_key

    assert all(sentence_key(s) in cached.index for s in FIRST + SECOND)
    assert stored["timings"]["sentences_not_from_cache"] == len(set(FIRST + SECOND))

    capsys.readouterr()
    assert main(["run", "--encoders", "glove-50d", "--tasks", "mteb:XRun", "--quiet"]) == 0
    assert "reused" in capsys.readouterr().out
    assert main(["leaderboard", "--papers", "none"]) == 0
    board = capsys.readouterr().out
    section = board[board.index("## mteb tasks") :]
    assert "| XRun" in section.splitlines()[2]
    assert f"{stored['main_score']:.2f}" in next(
        line for line in section.splitlines() if line.startswith("| glove-50d")
    )
    assert f"mteb:XRun: mteb-{mteb.__version__}" in section


def test_run_offline_missing_dataset_fails_that_task_alone(project, in_memory_tasks, capsys):
    from benchharness.cli import main

    assert main(["run", "--encoders", "glove-50d", "--tasks", "mteb:STS12,STSBenchmark", "--quiet"]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "mteb:STS12" in line and "failed" in line)
    assert "mteb/sts12-sts" in row and "0" * 40 in row and "offline" in row and "HF_HUB_CACHE" in row
    assert (project / "results" / "glove-50d" / "STSBenchmark.json").exists()
    assert not (project / "results" / "glove-50d" / "mteb:STS12.json").exists()


def test_unknown_mteb_task_in_run_exits_with_mteb_suggestions(project, capsys):
    from benchharness.cli import main

    assert main(["run", "--encoders", "glove-50d", "--tasks", "mteb:STS2x", "--quiet"]) == 2
    assert "unknown mteb task 'STS2x'" in capsys.readouterr().err


def test_without_mteb_the_error_says_how_to_install_it(project, monkeypatch, capsys):
    import sys

    from benchharness.cli import main

    for name in [m for m in sys.modules if m == "mteb" or m.startswith(("mteb.", "benchharness.mteb_bridge."))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mteb", None)  # `import mteb` now fails as if not installed
    assert main(["run", "--encoders", "glove-50d", "--tasks", "mteb:STS22", "--quiet"]) == 2
    assert "pip install -e '.[mteb]'" in capsys.readouterr().err
    assert main(["export", "mteb", "--out", str(project / "out")]) == 2
    assert "pip install -e '.[mteb]'" in capsys.readouterr().err


def test_export_command_writes_mteb_layout_and_says_what_it_left_out(tmp_path, capsys):
    from benchharness.cli import main

    out = tmp_path  # as the guide writes it: `--out mteb-results`, then mteb.ResultCache("mteb-results")
    assert (
        main(["export", "mteb", "--out", str(out), "--results-dir", str(ROOT / "results"), "--encoders", "minilm-l6"])
        == 0
    )
    printed = capsys.readouterr().out.splitlines()
    stored = {p.stem for p in (ROOT / "results" / "minilm-l6").glob("*.json")}
    exported = {line.split()[2] for line in printed if line.startswith("exported ")}
    assert exported == stored & set(EXPORTABLE)
    skipped = {line.split()[3].rstrip(":"): line for line in printed if line.startswith("not exported ")}
    assert set(skipped) == stored - set(EXPORTABLE)
    if "SICKRelatedness" in skipped:
        assert reason_not_exported("SICKRelatedness") in skipped["SICKRelatedness"]
    revision = _stored("minilm-l6", "STS12").encoder_identity["revision"]
    cache = mteb.ResultCache(tmp_path)
    assert cache.get_models() == [("sentence-transformers__all-MiniLM-L6-v2", revision)]
    names = {
        r.task_name
        for m in cache.load_results(models=["sentence-transformers/all-MiniLM-L6-v2"]).model_results
        for r in m.task_results
    }
    assert names == {EXPORTABLE[t].mteb_task for t in exported}

    assert (
        main(
            [
                "export",
                "mteb",
                "--out",
                str(out),
                "--results-dir",
                str(ROOT / "results"),
                "--encoders",
                "no-such-encoder",
            ]
        )
        == 2
    )
    assert "no-such-encoder" in capsys.readouterr().err


def test_a_trained_recipe_exports_its_base_and_the_mteb_tasks_it_trained_on(tmp_path):
    """The simcse recipe trains on sts-unlabeled (every sentence of STS12-16, STS-B and SICK, test
    sentences included) and selects its checkpoint on STS-B dev: not zero-shot on any of them."""
    from mteb.models import ModelMeta

    stored = _stored("simcse", "STS12")
    (exported,) = export_results([stored], tmp_path).exported
    meta = json.loads((Path(exported["path"]).parent / "model_meta.json").read_text())
    assert meta["adapted_from"] == "sentence-transformers/paraphrase-MiniLM-L3-v2"
    want = {"STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"}
    assert set(meta["training_datasets"]) == want
    assert all(mteb.get_task(name) for name in want)  # mteb's own names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        valid = ModelMeta.model_validate({k: v for k, v in meta.items() if k != "benchharness"})
    assert valid.is_zero_shot_on(["STS12"]) is False
