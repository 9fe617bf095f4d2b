"""NanoBEIR: the thirteen datasets as sentence-transformers' NanoBEIREvaluator names and reads
them, the folders the tasks read under the run's data root, the download's conversion of the hub's
rows (never the network: the rows are handed in), and the one-line errors offline."""

from __future__ import annotations

import inspect
import json
import logging

import numpy as np
import pytest

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.settings import Config
from benchharness.tasks import nanobeir
from tests.fakes import HashEncoder
from tests.nanobeir_helpers import hub_rows, write_data_root


def test_the_group_is_the_evaluators_thirteen_datasets_in_its_order_and_its_mean_is_a_score():
    st_nanobeir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.nano_beir")
    expected = [f"Nano{name}" for name in st_nanobeir.DATASET_NAME_TO_HUMAN_READABLE.values()]
    assert tasks.resolve("nanobeir") == expected == tasks.resolve("NanoBEIR")
    assert tasks.means() == {"nanobeir": expected}
    evaluator = inspect.signature(st_nanobeir.NanoBEIREvaluator).parameters["dataset_id"].default
    assert evaluator == nanobeir.DATASET_ID
    meta = tasks.get("NanoMSMARCO").declared
    assert (meta.main_score, meta.split, meta.groups, meta.board.average) == ("ndcg@10", "test", ("nanobeir",), True)


def test_each_task_reads_its_folder_under_the_runs_data_root(tmp_path):
    root = write_data_root(tmp_path / "data", ("SciFact", "NQ"))
    rows = hub_rows("SciFact")
    task = tasks.get("NanoSciFact")
    task.load(DataRoot(root))
    corpus = {r["_id"]: r["text"] for r in rows["corpus"]}
    assert task.data.corpus_ids == list(corpus) and task.data.documents == list(corpus.values())
    assert task.data.queries == [r["text"] for r in rows["queries"]]
    relevant = {(r["query-id"], r["corpus-id"]) for r in rows["qrels"]}
    got = {(q, task.data.corpus_ids[d]) for q, rel in zip(task.data.query_ids, task.data.relevant) for d in rel}
    assert got == relevant and all(set(rel.values()) == {1} for rel in task.data.relevant)
    assert sorted(str(f.relative_to(root)) for f in task.files) == [
        "nanobeir/NanoSciFact/corpus.jsonl",
        "nanobeir/NanoSciFact/qrels/test.tsv",
        "nanobeir/NanoSciFact/queries.jsonl",
    ]


def test_the_hubs_rows_become_the_folder_the_evaluator_would_read(tmp_path, monkeypatch):
    """Rows as NanoBEIR-en holds them, with what the evaluator's reader copes with: an empty text (left
    out, as its ``len(text) > 0``), a list of corpus ids in one qrels row, a judgement of a left-out
    document. The folder holds what the evaluator's own reader makes of the same rows."""
    st_nanobeir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.nano_beir")
    from datasets import Dataset

    rows = hub_rows("NFCorpus")
    rows["corpus"] += [{"_id": "empty-doc", "text": ""}]
    rows["queries"] += [{"_id": "empty-query", "text": ""}]
    rows["qrels"] += [
        {"query-id": "q0", "corpus-id": "empty-doc"},
        {"query-id": "empty-query", "corpus-id": rows["corpus"][0]["_id"]},
    ]
    hub = {subset: Dataset.from_list(r) for subset, r in rows.items()}
    asked = []

    def load(repo, subset, split, revision):
        asked.append((repo, subset, split, revision))
        return hub[subset]

    folder = tmp_path / "nanobeir" / "NanoNFCorpus"
    nanobeir.download("NFCorpus", folder, revision="abc123", load=load)
    assert [a[1:] for a in asked] == [(s, "NanoNFCorpus", "abc123") for s in ("corpus", "queries", "qrels")]
    source = json.loads((folder / "source.json").read_text())
    assert source["dataset"] == nanobeir.DATASET_ID and source["revision"] == "abc123"
    assert source["left_out"] == {"empty_documents": 1, "empty_queries": 1, "judgements": 2}

    requested = []

    def subset_split(self, subset, split, required_columns):
        requested.append((subset, split))
        return hub[subset]

    monkeypatch.setattr(st_nanobeir.NanoBEIREvaluator, "_load_dataset_subset_split", subset_split)
    [reference] = st_nanobeir.NanoBEIREvaluator(["nfcorpus"], write_csv=False).evaluators
    assert requested == [(a[1], a[2]) for a in asked]  # the subsets and split the evaluator asks the hub for
    task = tasks.get("NanoNFCorpus")
    task.load(DataRoot(tmp_path))
    assert (task.data.corpus_ids, task.data.documents) == (reference.corpus_ids, reference.corpus)
    assert (task.data.query_ids, task.data.queries) == (reference.queries_ids, reference.queries)
    ours = {q: {task.data.corpus_ids[d] for d in rel} for q, rel in zip(task.data.query_ids, task.data.relevant)}
    # the evaluator keeps the judgement of the empty document, which no model can retrieve; the folder drops it
    assert ours == {q: reference.relevant_docs[q] - {"empty-doc"} for q in reference.queries_ids}


def test_a_failed_download_is_one_line_and_leaves_no_folder(tmp_path):
    def offline(repo, subset, split, revision):
        raise ConnectionError("Couldn't reach the dataset on the Hub\n(LocalEntryNotFoundError)")

    folder = tmp_path / "nanobeir" / "NanoNQ"
    with pytest.raises(DataError) as caught:
        nanobeir.download("NQ", folder, revision="abc", load=offline)
    message = str(caught.value)
    assert "\n" not in message and "NanoBEIR's NQ" in message and "ConnectionError" in message
    assert not (tmp_path / "nanobeir").exists()


def test_offline_a_missing_dataset_fails_in_one_line_saying_how_to_get_it(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = write_data_root(tmp_path / "data", ("SciFact",))
    with pytest.raises(DataError, match=r"NanoBEIR's NQ is not in the data root .* offline .* run once online") as e:
        tasks.get("NanoNQ").load(DataRoot(root))
    assert "\n" not in str(e.value) and str(root / "nanobeir" / "NanoNQ") in str(e.value)
    caplog.set_level(logging.ERROR, logger="benchharness.evaluation.runner")
    results = benchharness.evaluate(HashEncoder(), "nanobeir", data_dir=root, errors="keep")
    assert [r.task for r in results] == ["NanoSciFact"] and len(results.failed) == 12
    told = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(told) == 1 and told[0].startswith("12 NanoBEIR datasets (NanoClimateFEVER, NanoDBPedia, NanoFEVER")
    assert f"are not in {root / 'nanobeir'} and this process is offline" in told[0]


def test_listing_reads_no_corpus_and_says_what_is_missing(tmp_path, monkeypatch):
    root = write_data_root(tmp_path / "data", ("ArguAna",))
    monkeypatch.delenv("BENCHHARNESS_DATA")
    config = Config(data_dir=root)  # the configuration's data root, as `benchharness list tasks` reads it
    argu = tasks.get("NanoArguAna", config)
    assert argu.metadata.n_samples == 6 and "content" not in argu.__dict__
    assert "a first run online downloads it" in tasks.get("NanoFEVER", config).metadata.description
    monkeypatch.setenv("BENCHHARNESS_DATA", str(tmp_path / "elsewhere"))  # the environment wins, as for every task
    assert tasks.get("NanoArguAna", config).metadata.n_samples is None


def test_the_group_runs_any_model_kind_and_pipeline_and_its_mean_is_the_unweighted_mean(tmp_path, data_dir):
    pytest.importorskip("bm25s")
    root = write_data_root(tmp_path / "data")
    (root / "glove").symlink_to(data_dir / "glove")  # the word vectors of glove-50d, beside the datasets
    names = tasks.resolve("nanobeir")
    encoders = ["bm25", "glove-50d", "bm25>>glove-50d?k=5"]
    results = benchharness.evaluate(encoders, "nanobeir", data_dir=root, intervals=False)
    assert not results.failed
    for encoder in encoders:
        scores = [results.get(encoder, name).main_score for name in names]
        mean = results.mean("nanobeir", encoder=encoder)
        assert mean.mean == pytest.approx(np.mean(scores), abs=1e-12) and mean.tasks == tuple(names)
        assert mean.low < mean.mean < mean.high
    for name in names:  # the pipeline's first stage is bm25 itself, searched once
        first = results.get("bm25>>glove-50d?k=5", name).metrics["first_stage/ndcg@10"]
        assert first == results.get("bm25", name).main_score
    table = str(results)
    assert all(f"| {encoder:<19} | nanobeir (mean of 13) | mean" in table for encoder in encoders)
