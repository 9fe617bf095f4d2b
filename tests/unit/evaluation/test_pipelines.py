"""Two-stage pipelines (``FIRST>>RERANKER?k=K``) and fusions (``rrf(A,B)``) run by name on a BEIR
folder, with toy models whose scores are given by hand: a first stage that lists documents by a
fixed score matrix (counting its searches), and rerankers that score pairs by another matrix. Every
expected list and figure below is worked out from those matrices, not from the code."""

from __future__ import annotations

import numpy as np
import pytest

import benchharness
from benchharness.core.errors import UserError
from benchharness.core.kinds import SearchContext, ViewSettings
from benchharness.core.specs import Family
from benchharness.encoders.pipeline import Pipeline
from benchharness.evaluation.kinds.first_stage import Searches, _Listed
from benchharness.evaluation.kinds.fusion import open_view as fused_view
from benchharness.evaluation.kinds.pipeline import open_view
from benchharness.evaluation.resolver import Resolver
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from tests.helpers import cli
from tests.pipeline_helpers import DOCS, FAMILY, QRELS, QUERIES, SEARCHES, TOYS, Listed, write_beir, write_run


@pytest.fixture
def beir(project, monkeypatch, register_plugin):
    """The toy BEIR folder (``tests.pipeline_helpers``), registered as ``toy-beir``; the ``toy:``
    family builds the toy models."""
    register_plugin("families", "toy", FAMILY)
    SEARCHES.clear()
    folder = write_beir(project / "beir")
    monkeypatch.setattr(declarations, "REGISTERED", {})
    register_file_task("toy-beir", folder, kind="retrieval")
    return folder


def _search(reranker: str, variant: str = "candidates", k: int = 3, depth: int = 5):
    """The lists of ``toy:first>>toy:<reranker>?k=<k>`` searched directly through the pipeline's view."""
    model = Pipeline("p", Listed("toy:first"), TOYS[reranker](reranker), k, variant)
    context = SearchContext([f"q{i}" for i in range(3)], [f"d{i}" for i in range(6)], [QRELS[q] for q in range(3)])
    view = open_view(model, ViewSettings())
    scores, ids = view.search(QUERIES, DOCS, depth, context=context)
    return scores, ids, view.facts()


def test_the_first_stages_top_k_is_reranked_and_padded(beir):
    scores, ids, facts = _search("judge")
    # top 3 by FIRST: [d0 d1 d2], [d3 d4 d5], [d1 d4 d0]; ordered by JUDGE
    assert ids.tolist() == [[2, 1, 0, -1, -1], [4, 5, 3, -1, -1], [4, 0, 1, -1, -1]]
    assert scores[0, :3] == pytest.approx([0.9, 0.5, 0.1]) and np.isneginf(scores[:, 3:]).all()
    # the ceiling: q0 finds 1 of its 2 relevant documents in the top 3, q1 and q2 theirs
    assert facts["first_stage/recall@3"] == pytest.approx(100 * (0.5 + 1 + 1) / 3)
    assert facts["reranker/pairs_scored"] == 9 and "positives_added" not in facts


def test_ties_of_the_reranker_keep_the_first_stages_order(beir):
    _, ids, _ = _search("flat")
    assert ids[:, :3].tolist() == [[0, 1, 2], [3, 4, 5], [1, 4, 0]]


def test_always_rerank_positives_adds_what_the_first_stage_missed(beir):
    _, ids, facts = _search("judge", variant="always_rerank_positives")
    # q0's d3, outside the top 3, joins the candidates and its 0.95 puts it first
    assert ids[0, :4].tolist() == [3, 2, 1, 0] and ids[1:, :3].tolist() == [[4, 5, 3], [4, 0, 1]]
    assert facts["positives_added"] == 1


def test_a_run_of_pipelines_searches_the_first_stage_once_and_reports_it(beir):
    names = ["toy:first>>toy:judge?k=2", "toy:first>>toy:agree?k=3", "toy:first>>toy:judge?k=200", "toy:first"]
    results = benchharness.evaluate(names, "toy-beir", intervals=False)

    # the pipelines' first stage searched once, as deep as the deepest k; the first stage alone by itself
    assert SEARCHES == [200, 100]
    by_name = {r.encoder: r for r in results}
    alone = by_name["toy:first"].metrics
    k3 = by_name["toy:first>>toy:agree?k=3"]
    for metric in ("ndcg@10", "map@100", "mrr@10", "recall@100"):
        assert k3.metrics[f"first_stage/{metric}"] == pytest.approx(alone[metric])
    # k=2 reranks [d0 d1], [d3 d4], [d1 d4]: [d1 d0], [d4 d3], [d4 d1]; RR: q0 0 (d2, d3 not listed), q1 1, q2 1/2
    k2 = by_name["toy:first>>toy:judge?k=2"]
    assert k2.metrics["mrr@10"] == pytest.approx(100 * (0 + 1 + 0.5) / 3)
    assert k2.metrics["first_stage/recall@2"] == pytest.approx(100 * (0 + 1 + 1) / 3)
    # k=200 reranks all six: q0 d3 (0.95) first, q1 d4, q2 d4 then d0 then d1
    assert by_name["toy:first>>toy:judge?k=200"].metrics["mrr@10"] == pytest.approx(100 * (1 + 1 + 1 / 3) / 3)
    assert k2.protocol["first_stage"] == "toy:first" and k2.protocol["rerank_depth"] == 2
    assert k2.protocol["variant"] == "file-beir-retrieval-cosine" and k2.protocol["model_kind"] == "pipeline"
    identity = k2.encoder_identity
    assert identity["k"] == 2 and identity["first_stage"]["family"] == "toy" and identity["variant"] == "candidates"


def test_the_positives_variant_is_another_protocol(beir):
    [result] = benchharness.evaluate("toy:first>>toy:judge?k=3&variant=always_rerank_positives", "toy-beir")
    assert result.protocol["variant"] == "file-beir-retrieval-cosine+always_rerank_positives"
    assert "CrossEncoderRerankingEvaluator" in result.protocol["reranked"]
    # [d3 d2 d1 d0], [d4 d5 d3], [d4 d0 d1]
    assert result.metrics["mrr@10"] == pytest.approx(100 * (1 + 1 + 1 / 3) / 3)


def test_a_dense_first_stage_gives_the_lists_it_gives_alone(beir):
    results = benchharness.evaluate(["toy:hash", "toy:hash>>toy:hash?k=6"], "toy-beir", intervals=False)
    alone, pipeline = results
    # reranked by its own cosines, all six documents keep the first stage's order: the same scores
    for metric in ("ndcg@10", "map@100", "mrr@10"):
        assert pipeline.metrics[metric] == pytest.approx(alone.metrics[metric])
        assert pipeline.metrics[f"first_stage/{metric}"] == pytest.approx(alone.metrics[metric])


def test_compare_pairs_a_pipeline_with_its_first_stage_by_query(beir):
    results = benchharness.evaluate(["toy:first>>toy:judge?k=3", "toy:first"], "toy-beir")
    comparison = benchharness.compare(results, results, encoder_a="toy:first>>toy:judge?k=3", encoder_b="toy:first")
    [row] = comparison.rows
    assert row.unit == "queries" and row.difference == pytest.approx(
        results.get("toy:first>>toy:judge?k=3", "toy-beir").main_score - results.get("toy:first", "toy-beir").main_score
    )


def test_a_fusion_ranks_by_the_sum_of_reciprocal_ranks(beir):
    fused = Resolver().get("rrf(toy:first,toy:second)")
    view = fused_view(fused, ViewSettings())
    scores, ids = view.search(QUERIES[:1], DOCS, 6)
    # q0: ranks by FIRST d0..d5 = 1..6; by JUDGE (its scores as a first stage) d3 1, d2 2, d1 3, d0 4, d4 5, d5 6
    # (d4 and d5 tie at 0: corpus order). d0 and d3 score 1/61 + 1/64, d1 and d2 1/62 + 1/63: ties by corpus order
    assert ids.tolist() == [[0, 3, 1, 2, 4, 5]]
    assert scores[0, 0] == pytest.approx(1 / 61 + 1 / 64) and scores[0, 4] == pytest.approx(2 / 65)
    [result] = benchharness.evaluate("rrf(toy:first,toy:second)>>toy:judge?k=2", "toy-beir", intervals=False)
    assert result.protocol["first_stage"] == "rrf(toy:first,toy:second)"
    assert result.encoder_identity["first_stage"]["rrf_k"] == 60


@pytest.mark.parametrize(
    ("name", "says"),
    [
        (
            "toy:judge>>toy:first?k=3",
            "toy:judge is a cross-encoder (a score for each text pair, read together) and cannot be a first stage",
        ),
        ("toy:first>>toy:first?k=3", "toy:first is a lexical model"),
        ("rrf(toy:first,toy:judge)", "cannot be a first stage"),
    ],
)
def test_a_part_of_the_wrong_kind_is_refused_in_one_line(beir, name, says):
    with pytest.raises(UserError, match="cannot") as caught:
        Resolver().get(name)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_check_validates_a_pipeline_without_loading_it(beir, register_plugin):
    def boom(name, spec, context):
        raise AssertionError("check loaded a model")

    register_plugin("families", "boom", Family.of("boom", boom, accepts=()))
    resolver = Resolver()
    resolver.check("boom:a>>boom:b?k=5&variant=always_rerank_positives")
    resolver.check("rrf(boom:a,boom:b+whitening)>>boom:c?k=5")
    for bad, says in [
        ("boom:a>>boom:b", "say how many"),
        ("boom:a>>nosuch?k=3", "unknown encoder 'nosuch'"),
        ("rrf(boom:a)>>boom:b?k=3", "give two or more"),
        ("boom:a>>boom:b?k=3&variant=maybe", "unknown variant 'maybe'"),
    ]:
        with pytest.raises(UserError, match=says):
            resolver.check(bad)


def test_a_pipeline_refuses_the_tasks_it_cannot_run(beir):
    results = benchharness.evaluate("toy:first>>toy:judge?k=3", "SICKRelatedness-trial", errors="keep")
    [failed] = results.failed
    assert "a two-stage pipeline" in failed.message and "a score for each text pair" in failed.message


def test_the_memo_serves_a_shorter_list_as_a_prefix_and_searches_a_deeper_one_again():
    searches = Searches({"a": 5})
    assert searches.depth("a", 3) == 5 and searches.depth("b", 3) == 3
    ranked = (np.arange(10.0)[::-1].reshape(2, 5), np.arange(10).reshape(2, 5))
    searches.keep("key", _Listed(ranked, {"index_bytes": 7}))
    found = searches.find("key", 2)
    assert found is not None and found.ranked[1].tolist() == [[0, 1], [5, 6]] and found.facts == {"index_bytes": 7}
    assert searches.find("key", 6) is None and searches.find("other", 1) is None
    assert (searches.searched, searches.served) == (1, 1)


def test_benchharness_compare_pairs_stored_pipeline_results_by_query(beir):
    ran = cli(beir.parent, "run", "--encoders", "toy:first>>toy:judge?k=3,toy:first", "--tasks", "toy-beir")
    assert ran.returncode == 0, ran.stderr
    compared = cli(beir.parent, "compare", "toy:first>>toy:judge?k=3", "toy:first", "--tasks", "toy-beir")
    assert compared.returncode == 0, compared.stderr
    assert "A = toy:first>>toy:judge?k=3, B = toy:first" in compared.stdout and "queries" in compared.stdout


def test_the_positives_variant_is_marked_wherever_it_is_shown(beir):
    variant = "toy:first>>toy:judge?k=3&variant=always_rerank_positives"
    assert cli(beir.parent, "run", "--encoders", f"{variant},toy:first", "--tasks", "toy-beir").returncode == 0
    compared = cli(beir.parent, "compare", variant, "toy:first", "--tasks", "toy-beir").stdout
    row = next(line for line in compared.splitlines() if line.startswith("| toy-beir"))
    assert row.split("|")[2].strip().endswith("‡") and not row.split("|")[3].strip().endswith("‡")
    assert "‡: scored under sentence-transformers' always_rerank_positives protocol" in compared
    board = cli(beir.parent, "leaderboard", "--tasks", "toy-beir", "--no-published").stdout
    marked = next(line for line in board.splitlines() if line.startswith(f"| {variant}"))
    assert "always_rerank_positives: the first stage's misses reranked too" in marked
    plain = next(line for line in board.splitlines() if line.startswith("| toy:first "))
    assert "always_rerank_positives" not in plain
    assert "file-beir-retrieval-cosine+always_rerank_positives" in board


def test_a_run_file_is_a_first_stage_found_by_ids(beir):
    run = write_run(beir.parent / "first.trec")
    results = benchharness.evaluate(
        ["toy:first", f"run:{run}", "toy:first>>toy:judge?k=3", f"run:{run}>>toy:judge?k=3"], "toy-beir"
    )
    first, from_file, pipeline, from_file_pipeline = results
    # the file holds the first stage's lists: the same scores alone and reranked
    assert from_file.main_score == pytest.approx(first.main_score)
    assert from_file_pipeline.main_score == pytest.approx(pipeline.main_score)
    assert from_file.protocol["model_kind"] == "run-file" and from_file.metrics["queries_not_in_run"] == 0
    assert len(from_file.encoder_identity["sha256"]) == 64


def test_a_run_file_without_the_tasks_ids_is_refused_in_one_line(beir):
    model = Resolver().get(f"run:{write_run(beir.parent / 'first.trec')}")
    view = model.view(ViewSettings())  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="finds its lists by query and document ids, and this task names neither"):
        view.search(QUERIES, DOCS, 3, context=SearchContext(relevant=[[0], [1], [2]]))
    with pytest.raises(UserError, match="lacks; is it a run of another collection"):
        view.search(
            QUERIES, DOCS[:5], 3, context=SearchContext([f"q{i}" for i in range(3)], [f"d{i}" for i in range(5)])
        )


def test_a_pipeline_registered_in_the_configuration_runs_under_its_name(beir):
    config = beir.parent / "benchharness.toml"
    config.write_text(config.read_text() + '\n[encoders.reranked]\nspec = "toy:first>>toy:judge?k=3"\n')
    [result] = benchharness.evaluate("reranked", "toy-beir", intervals=False)
    assert result.encoder == "reranked" and result.protocol["first_stage"] == "toy:first"
    assert result.metrics["first_stage/recall@3"] == pytest.approx(100 * (0.5 + 1 + 1) / 3)


def test_an_excluded_document_is_neither_a_candidate_nor_an_added_positive(beir):
    # QQP's way: no ids, the relevance, and each query's own document excluded (here q0's d0 and q2's d1)
    model = Pipeline("p", Listed("toy:first"), TOYS["judge"]("toy:judge"), 3, "always_rerank_positives")
    view = open_view(model, ViewSettings())
    relevant = [[2, 3], [4], [1]]
    _, ids = view.search(QUERIES, DOCS, 4, exclude=np.array([0, -1, 1]), context=SearchContext(relevant=relevant))
    # q0's top 3 without d0: d1 d2 d3 (d3 no longer missed); q2's without d1: d4 d0 d5, its positive d1 excluded
    assert ids.tolist() == [[3, 2, 1, -1], [4, 5, 3, -1], [4, 0, 5, -1]]
    assert view.facts()["positives_added"] == 0
