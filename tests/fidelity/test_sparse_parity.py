"""A sparse encoder (a tiny seeded SPLADE, ``tests.sparse_helpers``) scored by benchharness, through
``benchharness.evaluate("st:<folder>", ...)``, against sentence-transformers' own sparse evaluators
run on the same model and the same data.

Retrieval: STS-B test pairs as a BEIR folder (``benchmarks/beir_stsb.py``: first sentences are the
queries, second sentences the corpus, gold >= 4 relevant), against
``SparseInformationRetrievalEvaluator``. The two protocols agree on this data by construction, and
where they could differ the data is made so that they do not:

- relevance: the evaluator's qrels are sets (relevance 1), benchharness's graded (gain = the qrels
  score); every qrels score here is 1, so nDCG, MAP and recall are computed over the same gains;
- queries: both score only those with a relevant document, in ``queries.jsonl`` order;
- ties: the evaluator orders equal scores by corpus id (as strings), benchharness by corpus order;
  ``corpus.jsonl`` is written sorted by id, so the two orders are one;
- cutoffs: both rank each query's top 100 (the evaluator's largest cutoff is MAP@100) and cut
  nDCG and MRR at 10; MAP@100 divides by min(100, relevant) in the evaluator and by the relevant
  count in pytrec_eval's definition, equal here (no query has 100 relevant documents);
- texts: the documents as benchharness reads them (no titles: the text, stripped), both sides;
- scores: dot products of the same float32 vectors, summed in another order (scipy's sparse product,
  torch's), so a near tie may fall either way: within 0.01 (x100) is asked; measured, every metric and figure
  agreed to the last digit (nDCG@10 83.573392 both, on 116 queries and 477 documents).

Active dimensions, sparsity ratios and FLOPS are the evaluator's, computed on its own tensors.

STS: SICK-R trial against ``SparseEmbeddingSimilarityEvaluator`` (Spearman of the dot products,
its ``active_dims`` over both sides' sentences).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from benchmarks.beir_stsb import write_stsb_beir
from tests.helpers import DATA, needs_data
from tests.sparse_helpers import make_tiny_splade

#: STS-B test pairs made into the BEIR folder (of 1,379): enough queries for nDCG to mean something
PAIRS = 500
#: a difference (x100) that would show a protocol disagreement, not float rounding
TOLERANCE = 0.01


@pytest.fixture(scope="module")
def splade(tmp_path_factory):
    return make_tiny_splade(tmp_path_factory.mktemp("splade"))


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@needs_data("senteval/STS/STSBenchmark/sts-test.csv")
def test_sparse_retrieval_scores_what_sparse_information_retrieval_evaluator_scores(
    splade, project, tmp_path, monkeypatch
):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.evaluation import SparseInformationRetrievalEvaluator

    monkeypatch.setattr(declarations, "REGISTERED", {})
    stsb = tasks.get("STSBenchmark")
    stsb.load(DataRoot(DATA))
    ((first, second, gold),) = stsb.subsets.values()
    folder = tmp_path / "beir"
    write_stsb_beir(folder, first[:PAIRS], second[:PAIRS], np.asarray(gold[:PAIRS]))
    corpus_file = folder / "corpus.jsonl"
    documents = sorted(_jsonl(corpus_file), key=lambda d: d["_id"])  # corpus order = id order (ties)
    corpus_file.write_text("".join(json.dumps(d) + "\n" for d in documents))
    register_file_task("beir-sparse", folder, kind="retrieval")

    [ours] = benchharness.evaluate(f"st:{splade}", "beir-sparse", intervals=False)

    queries = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")}
    relevant: dict[str, set[str]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, document, _ = line.split("\t")
        relevant.setdefault(query, set()).add(document)
    evaluator = SparseInformationRetrievalEvaluator(
        queries=queries,
        corpus={d["_id"]: d["text"].strip() for d in documents},
        relevant_docs=relevant,
        mrr_at_k=[10],
        ndcg_at_k=[10],
        accuracy_at_k=[1],
        precision_recall_at_k=[100],
        map_at_k=[100],
        write_csv=False,
    )
    theirs = evaluator(SparseEncoder(str(splade), device="cpu", local_files_only=True))

    m = ours.metrics
    assert m["n_queries"] == len(evaluator.queries) > 100 and m["n_corpus"] == len(documents)
    for key in ("ndcg@10", "mrr@10", "map@100", "recall@100"):
        assert m[key] == pytest.approx(100 * theirs[f"dot_{key}"], abs=TOLERANCE), key
    assert 20 < m["ndcg@10"] < 100  # a lexical model finds many of STS-B's paraphrases
    for key in ("query_active_dims", "corpus_active_dims", "query_sparsity_ratio", "corpus_sparsity_ratio"):
        assert m[key] == pytest.approx(theirs[key], abs=TOLERANCE), key
    assert m["avg_flops"] == pytest.approx(theirs["avg_flops"], rel=1e-4)
    assert 5 < m["query_active_dims"] < 200 and m["avg_flops"] > 1  # sparse, and sharing terms
    assert m["index_bytes"] == pytest.approx(8 * m["corpus_active_dims"] * len(documents) + 4 * (len(documents) + 1))


@needs_data("senteval/SICK/SICK_trial.txt")
def test_sparse_sts_scores_what_sparse_embedding_similarity_evaluator_scores(splade, project):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.evaluation import SparseEmbeddingSimilarityEvaluator

    [ours] = benchharness.evaluate(f"st:{splade}", "SICKRelatedness-trial", intervals=False)

    sick = tasks.get("SICKRelatedness-trial")
    sick.load(DataRoot(DATA))
    ((first, second, gold),) = sick.subsets.values()
    evaluator = SparseEmbeddingSimilarityEvaluator(list(first), list(second), list(gold), write_csv=False)
    theirs = evaluator(SparseEncoder(str(splade), device="cpu", local_files_only=True))

    assert ours.metrics["n"] == len(first) == 500
    assert ours.main_score == pytest.approx(100 * theirs["spearman_dot"], abs=TOLERANCE)
    assert ours.metrics["active_dims"] == pytest.approx(theirs["active_dims"], abs=TOLERANCE)
    assert ours.metrics["sparsity_ratio"] == pytest.approx(theirs["sparsity_ratio"], abs=TOLERANCE)
