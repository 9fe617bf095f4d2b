"""A retrieval task from a BEIR folder scores what pytrec_eval (the evaluator BEIR and mteb use)
computes on the same rankings: STS-B test built as a BEIR folder (``benchmarks/beir_stsb.py``:
first sentences as queries, second sentences as the corpus, gold >= 4 relevant), encoded by
minilm-l3. Every query's nDCG@10, MAP@100, MRR@10 and recall@100 agree to 1e-6 (measured: 0 for
minilm-l3 and glove-50d, 1.1e-16 for minilm-l6); the numbers are in results/benchmarks/beir_stsb.txt."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from benchmarks.beir_stsb import encoded_once, pytrec_per_query, write_stsb_beir
from tests.helpers import DATA, needs_data

pytest.importorskip("pytrec_eval")


@needs_data("senteval/STS/STSBenchmark/sts-test.csv")
def test_stsb_as_beir_scores_pytrec_evals_values_for_minilm_l3(tmp_path, monkeypatch):
    from benchharness.evaluation.resolver import Resolver

    monkeypatch.setattr(declarations, "REGISTERED", {})
    stsb = tasks.get("STSBenchmark")
    stsb.load(DataRoot(DATA))
    ((first, second, gold),) = stsb.subsets.values()
    counts = write_stsb_beir(tmp_path / "stsb", first, second, gold)
    register_file_task("beir-stsb", tmp_path / "stsb", kind="retrieval")
    task = tasks.get("beir-stsb")
    task.load(DataRoot(DATA))
    assert task.data.n == counts["judged_queries"] > 300 and len(task.data.documents) == counts["corpus"]

    embed = encoded_once(Resolver().get("minilm-l3"), task)
    evaluation = task.evaluate_items(embed, 0)
    scores, ids, _ = task.search(embed)
    expected = pytrec_per_query(task, scores, ids)
    for key, values in expected.items():
        np.testing.assert_allclose(evaluation.items[key], values, atol=1e-6, rtol=0, err_msg=key)
        assert evaluation.metrics[key] == pytest.approx(100 * values.mean(), abs=1e-6)
    assert 50 < evaluation.metrics["ndcg@10"] < 100  # a real encoder finds most paraphrases
