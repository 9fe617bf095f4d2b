"""A multi-vector model (late interaction) retrieves through benchharness as sentence-transformers'
own ``MultiVectorInformationRetrievalEvaluator`` retrieves: ``st:<folder>`` of a seeded ColBERT-style
``MultiVectorEncoder`` on MiniLM-L3 (``tests.multi_vector_helpers``: "[Q] "/"[D] " prompts, queries
expanded to 32 tokens, punctuation dropped from documents), a BEIR folder declared as a retrieval
task (STS-B test's first 200 pairs, ``benchmarks/beir_stsb.py``: first sentences as queries, second
sentences as the corpus, gold >= 4 relevant), against the evaluator on the same model and data.

The two protocols are made to coincide where they could differ:

- ties: the evaluator orders tied scores by corpus id as text, benchharness by corpus order; the
  evaluator's ids are the documents' positions written with seven digits (``evaluator_inputs`` of
  ``benchmarks/beir_versus_st.py``, which the benchmark uses too), so the two orders are one;
- cutoffs: the evaluator keeps each query's best ``max_k`` = 100 documents, as the task does (its
  depth for MAP@100 and recall@100); it is asked for nDCG@10, MRR@10, MAP@100 and recall@100;
- relevance: every judgement is 1, so the evaluator's binary nDCG is pytrec_eval's graded one, and
  no query has more than 100 relevant documents, so its MAP (divided by min(100, relevant)) is
  pytrec_eval's (divided by the relevant count);
- queries: the evaluator is given the task's scored queries (those with a relevant document), as
  it would keep only those itself.

What still differs is how texts are batched (the evaluator encodes the corpus in chunks of 5,000,
benchharness in blocks under its memory bound, both 32 texts a batch sorted by length), which moves
a token vector by float32 rounding at most. Measured: every metric equal on both sides to 1e-12
(this subset, 39 queries and 182 documents: nDCG@10 80.5607, MRR@10 77.5031, MAP@100 78.1092; the
whole STS-B test folder, 309 queries and 1,337 documents: nDCG@10 76.8010), so the 0.01 (x100)
tolerance only absorbs rounding.
"""

from __future__ import annotations

import pytest

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from benchmarks.beir_stsb import write_stsb_beir
from benchmarks.beir_versus_st import METRICS, evaluator_inputs
from tests.helpers import DATA, MINILM_L3, needs_data
from tests.multi_vector_helpers import make_colbert

PAIRS = 200


@needs_data("senteval/STS/STSBenchmark/sts-test.csv")
def test_beir_retrieval_equals_multi_vector_information_retrieval_evaluator(tmp_path, monkeypatch):
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.multi_vector_encoder.evaluation import MultiVectorInformationRetrievalEvaluator

    folder = make_colbert(tmp_path / "colbert", MINILM_L3)
    monkeypatch.setattr(declarations, "REGISTERED", {})
    stsb = tasks.get("STSBenchmark")
    stsb.load(DataRoot(DATA))
    ((first, second, gold),) = stsb.subsets.values()
    write_stsb_beir(tmp_path / "stsb", first[:PAIRS], second[:PAIRS], gold[:PAIRS])
    register_file_task("beir-stsb-subset", tmp_path / "stsb", kind="retrieval")

    (result,) = benchharness.evaluate(
        f"st:{folder}", "beir-stsb-subset", data_dir=DATA, intervals=False, device="cpu", batch_size=32
    )
    assert result.protocol["model_kind"] == "multi-vector"

    task = tasks.get("beir-stsb-subset")
    task.load(DataRoot(DATA))
    data = task.data
    evaluator = MultiVectorInformationRetrievalEvaluator(**evaluator_inputs(data))
    reference = evaluator(MultiVectorEncoder(str(folder), local_files_only=True, device="cpu"))
    assert max(len(rel) for rel in data.relevant) <= 100
    assert {v for rel in data.relevant for v in rel.values()} == {1}
    for metric in METRICS:
        assert result.metrics[metric] == pytest.approx(100 * reference[f"maxsim_{metric}"], abs=0.01), metric
    assert 40 < result.metrics["ndcg@10"] < 100  # far above chance: the seeded projection keeps MiniLM's matches
    assert result.metrics["tokens_per_query"] == 32  # expanded to the fixed length
    assert result.metrics["bytes_per_document"] == 4 * 128 * result.metrics["tokens_per_document"]
