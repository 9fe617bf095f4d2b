"""Two-stage retrieval through benchharness (``minilm-l3>>st:<cross-encoder>?k=K`` on a BEIR folder)
against the same pipeline computed independently, and BM25 against ``bm25s`` run directly.

The data: STS-B test pairs as a BEIR folder (``benchmarks/beir_stsb.py``: first sentences are the
queries, second sentences the corpus, gold >= 4 relevant), its corpus written in id order so that
pytrec_eval's tie order (document id) is benchharness's (corpus order). The reranker: a
cross-encoder of MiniLM-L3 with a seeded head (``tests.helpers.make_cross_encoder``); its scores
say nothing of reranking's worth, only that the two computations agree.

- The default protocol, against sentence-transformers' ``SentenceTransformer.encode``, cosine top K
  by numpy, ``CrossEncoder.predict`` on each (query, candidate) pair and pytrec_eval's
  ``ndcg_cut.10`` on the reranked lists: nDCG@10 within 0.01 (x100), and the first stage's own
  nDCG@10 and recall@K (the reranker's ceiling) beside it.
- ``always_rerank_positives``, against ``CrossEncoderRerankingEvaluator(always_rerank_positives=True)``
  given each query's positives and the same top K as ``documents``: MAP, MRR@10 and nDCG@10 within
  0.01, and at K=20 its "base" figures (the first stage's ranking) against the pipeline's
  ``first_stage/``. (At K=2, where the first stage misses some positives, the evaluator's base nDCG@10
  counts them right after the candidates, not where the first stage ranked them.)
- BM25: ``bm25`` against ``bm25s.BM25()`` indexed on ``bm25s.tokenize(corpus)`` and retrieving for
  ``bm25s.tokenize(queries)``: every top-100 score equal, the same documents at each score, and
  pytrec_eval's nDCG@10 of bm25s's own lists equal to the task's.

Measured (500 pairs: 116 queries, 477 documents): at K=20 nDCG@10 19.231407 both (the first stage's
94.192839 both, its recall@20 100); ``always_rerank_positives`` at K=2 nDCG@10 81.228324, MRR@10
74.568966, MAP 74.568966 both (3 positives added; the default protocol's nDCG@10 there: 79.2784);
BM25's 11,600 top-100 scores equal to the bit, nDCG@10 87.018175 both.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.kinds import ViewSettings
from benchharness.evaluation.resolver import Resolver
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from benchmarks.beir_stsb import write_stsb_beir
from tests.helpers import DATA, MINILM_L3, make_cross_encoder, needs_data

#: one worker runs the module, so that its pipelines' run (a module fixture) is made once
pytestmark = [needs_data("senteval/STS/STSBenchmark/sts-test.csv"), pytest.mark.xdist_group("two-stage-parity")]
PAIRS = 500
TASK = "beir-two-stage"
#: the depth of the default protocol's comparison (and the variant's deeper one)
K = 20
#: a difference (x100) that would show a protocol disagreement, not float rounding
BOUND = 0.01


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    return make_cross_encoder(tmp_path_factory.mktemp("reranker") / "ce", seed=0)


def _write_folder(folder):
    """The STS-B BEIR folder, its corpus in id order."""
    stsb = tasks.get("STSBenchmark")
    stsb.load(DataRoot(DATA))
    ((first, second, gold),) = stsb.subsets.values()
    write_stsb_beir(folder, first[:PAIRS], second[:PAIRS], np.asarray(gold[:PAIRS]))
    corpus = folder / "corpus.jsonl"
    documents = sorted(_jsonl(corpus), key=lambda d: d["_id"])
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents))
    return folder


@pytest.fixture
def folder(project, monkeypatch):
    """The folder, registered as ``TASK``."""
    folder = _write_folder(project / "beir")
    monkeypatch.setattr(declarations, "REGISTERED", {})
    register_file_task(TASK, folder, kind="retrieval")
    return folder


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory, data_dir, reranker):
    """The folder and benchharness's result for each pipeline compared below, all from one run in a
    project of their own (the first stage searched once, each pair scored once), and the independent
    side's top ``K`` by cosine (a prefix of it is the top 2: the sort is stable)."""
    root = tmp_path_factory.mktemp("two-stage")
    names = {
        "default": f"minilm-l3>>st:{reranker}?k={K}",
        K: f"minilm-l3>>st:{reranker}?k={K}&variant=always_rerank_positives",
        2: f"minilm-l3>>st:{reranker}?k=2&variant=always_rerank_positives",
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setenv("BENCHHARNESS_DATA", str(data_dir))
        folder = _write_folder(root / "beir")
        patch.setattr(declarations, "REGISTERED", {})
        register_file_task(TASK, folder, kind="retrieval")
        results = benchharness.evaluate(list(names.values()), TASK, intervals=False, cache_dir=root / ".cache")
    ours = {key: results.get(name, TASK) for key, name in names.items()}
    _, queries, _, documents, _ = _data(folder)
    return folder, ours, _cosine_top(queries, documents, K)


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _data(folder):
    """(query ids, query texts, doc ids, doc texts, relevant doc ids by query) of the scored queries."""
    docs = _jsonl(folder / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")}
    relevant: dict[str, set[str]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, document, _ = line.split("\t")
        relevant.setdefault(query, set()).add(document)
    scored = [q for q in queries if q in relevant]
    return scored, [queries[q] for q in scored], [d["_id"] for d in docs], [d["text"].strip() for d in docs], relevant


def _cosine_top(queries, documents, k):
    """Each query's top ``k`` documents by the cosine of sentence-transformers' own vectors."""
    from huggingface_hub import snapshot_download
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(snapshot_download(MINILM_L3, local_files_only=True), device="cpu")
    q = model.encode(queries, normalize_embeddings=True, convert_to_numpy=True)
    d = model.encode(documents, normalize_embeddings=True, convert_to_numpy=True)
    cosines = q @ d.T
    return [np.argsort(-row, kind="stable")[:k] for row in cosines]


def _ndcg10(run, relevant, query_ids, doc_ids):
    import pytrec_eval

    position = {d: i for i, d in enumerate(doc_ids)}

    def name(doc: str) -> str:  # a larger name for an earlier document: trec_eval's tie order is corpus order
        return f"{10**9 - position[doc]:010d}"

    qrels = {q: {name(d): 1 for d in relevant[q]} for q in query_ids}
    named = {q: {name(d): float(s) for d, s in run[q].items()} for q in query_ids}
    found = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(named)
    return 100 * float(np.mean([found[q]["ndcg_cut_10"] for q in query_ids]))


def test_a_dense_first_stage_reranked_scores_what_an_independent_computation_scores(pipelines, reranker):
    from sentence_transformers import CrossEncoder

    folder, ours, top = pipelines
    k = K
    query_ids, queries, doc_ids, documents, relevant = _data(folder)
    pairs = [(query, documents[j]) for query, row in zip(queries, top) for j in row]
    scores = CrossEncoder(str(reranker), device="cpu", local_files_only=True).predict(pairs, batch_size=64)
    run = {q: {} for q in query_ids}
    for i, (q, row) in enumerate(zip(query_ids, top)):
        run[q] = {doc_ids[j]: scores[i * k + n] for n, j in enumerate(row)}
    first = {q: {doc_ids[j]: float(k - n) for n, j in enumerate(row)} for q, row in zip(query_ids, top)}
    ceiling = 100 * np.mean(
        [len(relevant[q] & {doc_ids[j] for j in row}) / len(relevant[q]) for q, row in zip(query_ids, top)]
    )

    m = ours["default"].metrics
    assert m["n_queries"] == len(query_ids) > 100 and m["reranker/pairs_scored"] == k * len(query_ids)
    assert abs(m["ndcg@10"] - _ndcg10(run, relevant, query_ids, doc_ids)) < BOUND
    assert abs(m["first_stage/ndcg@10"] - _ndcg10(first, relevant, query_ids, doc_ids)) < BOUND
    assert abs(m[f"first_stage/recall@{k}"] - ceiling) < BOUND
    assert m["ndcg@10"] < m["first_stage/ndcg@10"] - 10  # a random head: reranking hurts, visibly


@pytest.mark.parametrize("k", [K, 2])
def test_always_rerank_positives_scores_what_cross_encoder_reranking_evaluator_scores(pipelines, reranker, k):
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator

    folder, ours, top = pipelines
    query_ids, queries, doc_ids, documents, relevant = _data(folder)
    text = dict(zip(doc_ids, documents))
    samples = [
        {
            "query": query,
            "positive": [text[d] for d in sorted(relevant[q])],
            "documents": [documents[j] for j in row[:k]],
        }
        for q, query, row in zip(query_ids, queries, top)
    ]
    evaluator = CrossEncoderRerankingEvaluator(samples, at_k=10, always_rerank_positives=True, write_csv=False)
    theirs = evaluator(CrossEncoder(str(reranker), device="cpu", local_files_only=True))

    m = ours[k].metrics
    assert ours[k].protocol["variant"].endswith("+always_rerank_positives")
    assert abs(m["ndcg@10"] - 100 * theirs["ndcg@10"]) < BOUND
    assert abs(m["mrr@10"] - 100 * theirs["mrr@10"]) < BOUND
    assert abs(m["map@100"] - 100 * theirs["map"]) < BOUND  # every positive is in each list: AP over it
    if k >= 10:
        assert abs(m["first_stage/ndcg@10"] - 100 * theirs["base_ndcg@10"]) < BOUND
        assert abs(m["first_stage/mrr@10"] - 100 * theirs["base_mrr@10"]) < BOUND
    else:
        assert m["positives_added"] > 0  # the first stage missed some, and the variant reranked them


@pytest.mark.parametrize("name", ["bm25", "bm25:robertson?k1=1.2&b=0.5"])
def test_bm25_scores_and_ranks_the_folder_as_bm25s_does(folder, name):
    bm25s = pytest.importorskip("bm25s")
    query_ids, queries, doc_ids, documents, relevant = _data(folder)
    settings = {} if name == "bm25" else {"method": "robertson", "k1": 1.2, "b": 0.5}
    retriever = bm25s.BM25(**settings)
    retriever.index(bm25s.tokenize(documents, show_progress=False), show_progress=False)
    found, found_scores = retriever.retrieve(bm25s.tokenize(queries, show_progress=False), k=100, show_progress=False)

    view = Resolver().get(name).view(ViewSettings())  # type: ignore[attr-defined]
    scores, ids = view.search(queries, documents, 100)
    np.testing.assert_array_equal(scores, found_scores.astype(np.float64))
    for row_s, row_i, theirs in zip(scores, ids, found):
        for value in set(row_s.tolist()) - {row_s[-1]}:  # the group cut at 100 may hold others on each side
            assert set(row_i[row_s == value]) == set(theirs[row_s == value])

    [ours] = benchharness.evaluate(name, TASK, intervals=False)
    run = {
        q: {doc_ids[j]: float(s) for j, s in zip(row, row_s)} for q, row, row_s in zip(query_ids, found, found_scores)
    }
    assert abs(ours.main_score - _ndcg10(run, relevant, query_ids, doc_ids)) < BOUND
    assert 50 < ours.main_score < 100  # STS-B's paraphrases share many words
