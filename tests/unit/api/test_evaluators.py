"""The evaluators for training loops score the model being trained as ``benchharness run`` scores
its saved checkpoint."""

from __future__ import annotations

import types

import pytest

import benchharness
from benchharness.training.evaluators import EvaluationCallback, STSEvaluator

TASK = "STSBenchmark-dev"


@pytest.fixture(scope="module")
def tiny_st(tiny_bert):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    word = Transformer(str(tiny_bert), max_seq_length=128)
    return SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device="cpu")


def test_the_sentence_transformers_evaluator_names_its_metrics_and_matches_a_saved_run(tiny_st, project):
    evaluator = STSEvaluator()
    metrics = evaluator(tiny_st, epoch=0, steps=7)
    assert evaluator.primary_metric == f"benchharness_{TASK}_main"
    tiny_st.save(str(project / "saved"))
    stored = benchharness.evaluate(f"st:{project / 'saved'}", TASK).results[0]
    # the thread share (core.cpu_share) may run the two encodings at different thread counts on a busy
    # machine, which moves vectors in their last bits (~6e-8) and the correlations by ~1e-10
    assert metrics[evaluator.primary_metric] == pytest.approx(stored.main_score / 100, abs=1e-8)
    assert metrics[f"benchharness_{TASK}_pearson"] == pytest.approx(stored.metrics["pearson"] / 100, abs=1e-8)
    assert evaluator.history[0][0] == 7


def test_the_evaluator_runs_inside_the_sentence_transformers_trainer(tiny_st, project):
    pytest.importorskip("datasets")
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    pairs = ["a man is playing a guitar", "a woman slices an onion", "two dogs run in a field", "a child reads"]
    data = Dataset.from_dict({"anchor": pairs * 4, "positive": pairs * 4})
    evaluator = STSEvaluator()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(project / "out"),
        max_steps=4,
        per_device_train_batch_size=4,
        eval_strategy="steps",
        eval_steps=2,
        save_steps=2,
        logging_steps=2,
        report_to=[],
        use_cpu=True,
        seed=0,
    )
    trainer = SentenceTransformerTrainer(
        model=tiny_st, args=args, train_dataset=data, loss=MultipleNegativesRankingLoss(tiny_st), evaluator=evaluator
    )
    trainer.train()
    assert [step for step, _ in evaluator.history] == [2, 4]
    for step, results in evaluator.history:
        saved = benchharness.evaluate(f"st:{project / 'out' / f'checkpoint-{step}'}", TASK).results[0]
        assert results.results[0].main_score == pytest.approx(saved.main_score, abs=1e-6)


def test_the_transformers_callback_adds_the_scores_of_the_model_it_is_handed(tiny_bert, project):
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    callback = EvaluationCallback(tokenizer, "avg")
    metrics = {"eval_loss": 1.0}
    callback.on_evaluate(None, types.SimpleNamespace(global_step=3), None, model=model, metrics=metrics)
    expected = benchharness.evaluate(f"hf:{tiny_bert}?pooling=avg", TASK).results[0].main_score
    assert metrics[f"eval_benchharness_{TASK}_main"] == expected and metrics["eval_loss"] == 1.0
    state = types.SimpleNamespace(global_step=10, log_history=[])
    EvaluationCallback(tokenizer, "avg", every_steps=5).on_step_end(None, state, None, model=model)
    assert state.log_history[0]["step"] == 10 and state.log_history[0][f"benchharness_{TASK}_main"] == expected
