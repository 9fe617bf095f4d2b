"""The training evaluators given NanoBEIR: its mean is the primary metric, logged with its interval
(each task's queries resampled within the task), as ``Results.mean`` computes it from the same
evaluation; and a sentence-transformers trainer selects its checkpoint on it."""

from __future__ import annotations

import logging
import types

import pytest

from benchharness import tasks
from benchharness.training.evaluators import EvaluationCallback, STSEvaluator
from tests.nanobeir_helpers import write_data_root


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return write_data_root(tmp_path_factory.mktemp("nanobeir-data"))


@pytest.fixture(scope="module")
def tiny_st(tiny_bert):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    word = Transformer(str(tiny_bert), max_seq_length=128)
    return SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device="cpu")


def test_the_group_mean_is_the_primary_metric_with_its_interval_logged(tiny_st, data_root, project, caplog):
    caplog.set_level(logging.INFO, logger="benchharness.training.evaluators")
    evaluator = STSEvaluator("nanobeir", data_dir=str(data_root))
    metrics = evaluator(tiny_st, epoch=0, steps=5)
    assert evaluator.primary_metric == "benchharness_nanobeir_mean"
    [(step, results)] = evaluator.history
    mean = results.mean("nanobeir")
    assert step == 5 and [r.task for r in results] == tasks.resolve("nanobeir")
    assert metrics["benchharness_nanobeir_mean"] == pytest.approx(
        sum(r.main_score for r in results) / 1300, abs=1e-12
    )  # fractions, as sentence-transformers' NanoBEIREvaluator reports its mean
    assert (metrics["benchharness_nanobeir_mean_low"], metrics["benchharness_nanobeir_mean_high"]) == pytest.approx(
        (mean.low / 100, mean.high / 100), abs=1e-12
    )
    assert metrics["benchharness_nanobeir_mean_low"] < metrics["benchharness_nanobeir_mean"]
    assert metrics["benchharness_NanoMSMARCO_main"] == results.get(results.encoders[0], "NanoMSMARCO").main_score / 100
    [logged] = [r.getMessage() for r in caplog.records if "nanobeir_mean" in r.getMessage()]
    assert logged == f"step 5: nanobeir_mean {mean.mean:.2f} over 13 tasks, {mean.note()}"


def test_a_list_of_tasks_averaged_as_the_evaluator_averages_a_subset(tiny_st, data_root, project):
    evaluator = STSEvaluator(["NanoNQ", "NanoSciFact"], data_dir=str(data_root), mean=True, name="dev")
    metrics = evaluator(tiny_st, steps=1)
    assert evaluator.primary_metric == "dev_mean"
    scores = [metrics["dev_NanoNQ_main"], metrics["dev_NanoSciFact_main"]]
    assert metrics["dev_mean"] == pytest.approx(sum(scores) / 2, abs=1e-12)
    assert metrics["dev_mean_low"] < metrics["dev_mean"] < metrics["dev_mean_high"]
    plain = STSEvaluator(["NanoNQ", "nanobeir"], data_dir=str(data_root))
    assert plain.primary_metric == "NanoNQ_main" and plain.means.groups == ["nanobeir"]


def test_the_transformers_callback_adds_the_group_mean_and_its_interval(tiny_bert, data_root, project):
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    callback = EvaluationCallback(tokenizer, "avg", tasks="NanoBEIR", data_dir=str(data_root))
    metrics: dict[str, float] = {}
    callback.on_evaluate(None, types.SimpleNamespace(global_step=2), None, model=model, metrics=metrics)
    [(_, results)] = callback.history
    mean = results.mean("nanobeir")
    assert metrics["eval_benchharness_nanobeir_mean"] == mean.mean
    assert (metrics["eval_benchharness_nanobeir_mean_low"], metrics["eval_benchharness_nanobeir_mean_high"]) == (
        mean.low,
        mean.high,
    )


def test_the_trainer_selects_its_checkpoint_on_the_group_mean(tiny_st, data_root, project):
    pytest.importorskip("datasets")
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    pairs = ["where is the river near a stone", "the river beside the stone", "a candle near the mirror", "a mirror"]
    evaluator = STSEvaluator("nanobeir", data_dir=str(data_root))
    args = SentenceTransformerTrainingArguments(
        output_dir=str(project / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="steps",
        save_steps=1,
        load_best_model_at_end=True,
        metric_for_best_model="eval_benchharness_nanobeir_mean",
        report_to=[],
        use_cpu=True,
        seed=0,
    )
    data = Dataset.from_dict({"anchor": pairs * 2, "positive": pairs[1:] + pairs[:1] + pairs[1:] + pairs[:1]})
    trainer = SentenceTransformerTrainer(
        model=tiny_st, args=args, train_dataset=data, loss=MultipleNegativesRankingLoss(tiny_st), evaluator=evaluator
    )
    trainer.train()
    logged = [e for e in trainer.state.log_history if "eval_benchharness_nanobeir_mean" in e]
    assert [e["step"] for e in logged] == [1, 2]
    assert all(e["eval_benchharness_nanobeir_mean_low"] < e["eval_benchharness_nanobeir_mean_high"] for e in logged)
    best = max(logged, key=lambda e: e["eval_benchharness_nanobeir_mean"])
    assert trainer.state.best_metric == best["eval_benchharness_nanobeir_mean"]
    assert trainer.state.best_model_checkpoint.endswith(f"checkpoint-{best['step']}")
