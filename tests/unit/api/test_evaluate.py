"""``benchharness.evaluate``: every kind of model scores what the same model loaded by name scores,
in-memory weights are pinned by their fingerprint, and callables only by a given identity."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import benchharness
from benchharness.encoders.in_memory import module_fingerprint
from benchharness.evaluation.models import as_encoder
from tests.helpers import DATA

TASK = "STSBenchmark-dev"


@pytest.fixture(scope="module")
def st_folder(tiny_bert, tmp_path_factory):
    """A sentence-transformers model (tiny BERT + mean pooling) saved to a folder."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    word = Transformer(str(tiny_bert), max_seq_length=128)
    model = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device="cpu")
    folder = tmp_path_factory.mktemp("tiny-st")
    model.save(str(folder))
    return folder


@pytest.fixture
def isolated(project):
    return project


def score(results, task=TASK):
    [result] = [r for r in results if r.task == task]
    return result.main_score


def test_a_transformers_model_scores_as_its_hf_spec(tiny_bert, isolated):
    from transformers import AutoModel, AutoTokenizer

    by_name = benchharness.evaluate(f"hf:{tiny_bert}?pooling=avg", TASK)
    model, tokenizer = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    model.train()
    in_memory = benchharness.evaluate(model, TASK, tokenizer=tokenizer, pooling="avg")
    assert score(in_memory) == score(by_name)
    assert model.training  # evaluated in eval mode, handed back in the mode it was in


def test_a_sentence_transformer_and_a_callable_around_it_score_as_its_st_spec(st_folder, isolated):
    from sentence_transformers import SentenceTransformer

    by_name = score(benchharness.evaluate(f"st:{st_folder}", TASK))
    model = SentenceTransformer(str(st_folder), device="cpu")
    assert score(benchharness.evaluate(model, TASK)) == by_name
    for convert in (np.asarray, torch.tensor, lambda a: a.tolist()):
        out = benchharness.evaluate(
            lambda batch, convert=convert: convert(model.encode(batch)), TASK, identity="tiny-st"
        )
        assert score(out) == pytest.approx(by_name, abs=1e-6)


def chars(batch):
    """Letter counts: a cheap encoder whose cosines vary from pair to pair."""
    return np.stack([np.bincount([ord(c) % 16 for c in s], minlength=16) for s in batch]).astype(float)


def test_the_harness_batches_for_a_callable(isolated):
    sizes = []

    def fn(batch):
        sizes.append(len(batch))
        return chars(batch)

    benchharness.evaluate(fn, TASK, batch_size=100, identity="chars")
    dev = benchharness.tasks.get(TASK)
    dev.load(benchharness.core.data_root.DataRoot(DATA))
    n = len(dict.fromkeys(dev.sentences()))
    assert sizes == [100] * (n // 100) + ([n % 100] if n % 100 else [])


def test_a_callable_without_identity_is_returned_unpinned_and_never_stored(isolated, caplog):
    def fn(batch):
        return chars(batch)

    results = benchharness.evaluate(fn, TASK, results_dir=isolated / "results", cache_dir=isolated / "cache")
    assert any("not stored" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    assert not results.pinned and len(results) == 1
    assert not (isolated / "results").exists() and not (isolated / "cache").exists()
    assert "unpinned" in str(results)
    pinned = benchharness.evaluate(
        fn, TASK, identity="ones", results_dir=isolated / "results", cache_dir=isolated / "cache", name="ones"
    )
    stored = json.loads((isolated / "results" / "ones" / f"{TASK}.json").read_text())
    assert stored["main_score"] == pinned.results[0].main_score
    assert stored["encoder_identity"]["identity"] == "ones" and any((isolated / "cache").iterdir())


def test_one_training_step_changes_the_fingerprint(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    before = as_encoder(model, tokenizer=tokenizer, pooling="avg").identity
    assert as_encoder(model, tokenizer=tokenizer, pooling="avg").identity == before
    assert as_encoder(model, tokenizer=tokenizer, pooling="cls_before_pooler").identity != before
    weights = module_fingerprint(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = tokenizer(["a dog runs", "the cat sleeps"], return_tensors="pt", padding=True)
    model(**batch).last_hidden_state.pow(2).mean().backward()
    optimizer.step()
    assert module_fingerprint(model) != weights
    assert as_encoder(model, tokenizer=tokenizer, pooling="avg").identity != before


def test_results_print_as_a_table_and_convert_to_pandas(isolated):
    results = benchharness.evaluate("glove-50d", ["STSBenchmark", "SICKRelatedness"])
    frame = results.to_pandas()
    assert list(frame["task"]) == ["STSBenchmark", "SICKRelatedness"]
    assert list(frame["main_score"]) == [r.main_score for r in results]
    assert (frame["ci_low"] < frame["main_score"]).all() and (frame["main_score"] < frame["ci_high"]).all()
    assert "| glove-50d | STSBenchmark" in str(results)
    assert not (isolated / "results").exists()  # nothing written by default


def test_task_objects_and_names_mix(isolated):
    results = benchharness.evaluate("glove-50d", [benchharness.tasks.get("STSBenchmark"), "STS12"])
    assert [r.task for r in results] == ["STSBenchmark", "STS12"]


def test_bad_models_are_refused_with_what_to_pass(tiny_bert):
    from transformers import AutoModel

    with pytest.raises(benchharness.core.errors.InvalidInputError, match="tokenizer= and pooling="):
        benchharness.evaluate(AutoModel.from_pretrained(tiny_bert), TASK)
    with pytest.raises(benchharness.core.errors.InvalidInputError, match="cannot evaluate a int"):
        benchharness.evaluate(3, TASK)
    failed = benchharness.evaluate(lambda batch: np.ones(3), TASK, identity="bad", errors="keep").failed
    assert len(failed) == 1 and "returned an array of shape (3,)" in failed[0].message
