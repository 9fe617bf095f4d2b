"""Quality against cost: each result of each kind becomes a point whose bytes per document and
operations per query-document pair are worked out here by hand from what the result records, a task
gets panels only when a sparse or multi-vector model has a point on it, and tasks are never mixed."""

from __future__ import annotations

import pytest

from benchharness.core.results import Result
from benchharness.reporting.cost_curve import BYTES_UNIT, WORK_UNIT, cost_figure, cost_lines, cost_points

TASK, BINARY_INDEX, RERANK, STS = "my-beir", "my-beir-binary", "my-rerank", "STSBenchmark"


def result(
    encoder: str,
    task: str,
    score: float,
    metrics: dict | None = None,
    kind: str | None = None,
    stats: dict | None = None,
    interval: tuple[float, float] | None = None,
) -> Result:
    return Result(
        encoder=encoder,
        task=task,
        main_score=score,
        main_metric="ndcg@10",
        metrics={"ndcg@10": score, **(metrics or {})},
        protocol={"variant": "v", **({"model_kind": kind} if kind else {})},
        encoder_identity={"hash": encoder},
        encoder_metadata={},
        data={"sha256": "d", "root": "", "files": [], "verified": True},
        seed=1111,
        timings={},
        versions={},
        date="today",
        embedding_stats=stats,
        confidence={"main": list(interval)} if interval else None,
    )


def dense(encoder: str, task: str, score: float, dimensions: int, size: float, **metrics) -> Result:
    return result(encoder, task, score, metrics, stats={"dimensions": dimensions, "bytes_per_vector": size})


SPARSE_ROW = {"query_active_dims": 12.0, "corpus_active_dims": 30.0, "index_bytes": 24_400, "bytes_per_document": 244.0}
TOKENS = {"tokens_per_query": 32.0, "tokens_per_document": 40.5, "token_dimension": 128, "index_bytes": 2_073_600}

RESULTS = [
    dense("minilm", TASK, 40.0, 384, 1536, index_bytes=153_600, n_corpus=100),
    dense("minilm+quantize(precision=int8)", TASK, 39.0, 384, 384, index_bytes=153_600, n_corpus=100),
    dense("minilm+truncate(d=128)+quantize(precision=binary)", TASK, 30.0, 128, 16),
    result("splade", TASK, 45.0, {**SPARSE_ROW, "avg_flops": 5.5}, "sparse", interval=(41.0, 49.5)),
    result("colbert", TASK, 50.0, {**TOKENS, "bytes_per_document": 20_736.0}, "multi-vector", interval=(44.0, 55.0)),
    result("reranker", TASK, 52.0, {}, "cross-encoder"),  # no index: no cost
    # the same float32 encoder on a task whose index holds sign bits: 48 bytes a document, not 1536
    dense("minilm", BINARY_INDEX, 35.0, 384, 1536, index_bytes=4_800, n_corpus=100),
    result("splade", BINARY_INDEX, 44.0, {**SPARSE_ROW, "avg_flops": 6.0}, "sparse"),
    # a sparse model that reranked candidate pairs searched no corpus: no bytes per document
    result("splade", RERANK, 60.0, {"avg_flops": 4.0}, "sparse"),
    dense("minilm", RERANK, 58.0, 384, 1536),
    dense("minilm", STS, 82.0, 384, 1536),  # dense alone: the size curve's, no cost panel
]


def test_each_kind_costs_its_bytes_per_document_and_its_operations_per_pair():
    by_task = cost_points(RESULTS)
    assert list(by_task) == [TASK, BINARY_INDEX]  # the rerank task's sparse result has no bytes; STS is dense alone
    costs = {(p.encoder, p.kind): (p.bytes_per_document, p.work, p.score, p.interval) for p in by_task[TASK]}
    assert costs == {
        ("minilm", "dense float32"): (4 * 384, 384, 40.0, None),  # 4 bytes a value; d multiply-adds
        ("minilm+quantize(precision=int8)", "dense int8"): (384, 384, 39.0, None),  # a byte a value, d of them
        ("minilm+truncate(d=128)+quantize(precision=binary)", "dense binary"): (128 / 8, 128, 30.0, None),  # d bits
        ("splade", "sparse"): (244.0, 5.5, 45.0, (41.0, 49.5)),  # the CSR row's bytes; the expected shared terms
        ("colbert", "multi-vector"): (20_736.0, 32 * 40.5 * 128, 50.0, (44.0, 55.0)),  # a dot product a token pair
    }
    # the legend's order: dense by precision, then sparse, then multi-vector
    assert [p.kind for p in by_task[TASK]] == ["dense float32", "dense int8", "dense binary", "sparse", "multi-vector"]
    (float_on_bits, sparse) = by_task[BINARY_INDEX]
    assert (float_on_bits.kind, float_on_bits.bytes_per_document, float_on_bits.work) == ("dense binary", 48.0, 384)
    assert (sparse.task, sparse.work) == (BINARY_INDEX, 6.0)  # its own task's figure, never the other's
    lines = cost_lines(by_task[TASK])
    assert lines[-1] == (
        f"  colbert (multi-vector): ndcg@10 50.00 [44.00, 55.00], 20,736 {BYTES_UNIT}, 165,888 {WORK_UNIT}"
    )
    assert lines[3] == f"  splade (sparse): ndcg@10 45.00 [41.00, 49.50], 244 {BYTES_UNIT}, 5.5 {WORK_UNIT}"


def test_the_figure_draws_a_row_a_task_a_series_a_kind_with_the_intervals():
    by_task = cost_points(RESULTS)
    fig = cost_figure(by_task)
    assert len(fig.axes) == 4  # two tasks, two panels each
    size_panel, work_panel = fig.axes[0], fig.axes[1]
    assert (size_panel.get_title(), size_panel.get_xlabel()) == (TASK, BYTES_UNIT)
    assert (work_panel.get_xlabel(), work_panel.get_xscale()) == (WORK_UNIT, "log")
    drawn = {bars.get_label(): bars for bars in size_panel.containers}
    assert list(drawn) == ["dense float32", "dense int8", "dense binary", "sparse", "multi-vector"]
    assert [tuple(xy) for xy in zip(*drawn["sparse"].lines[0].get_data())] == [(244.0, 45.0)]
    (whisker,) = drawn["multi-vector"].lines[2][0].get_segments()
    assert whisker.tolist() == [[20_736.0, 44.0], [20_736.0, 55.0]]  # the 95% interval, low to high
    worked = {bars.get_label(): list(zip(*bars.lines[0].get_data())) for bars in work_panel.containers}
    assert worked["multi-vector"] == [(pytest.approx(32 * 40.5 * 128), 50.0)]
    assert worked["dense binary"] == [(128, 30.0)]
    # each point named; a long name's middle elided
    labels = {"minilm", "minilm+quantize(precision=int8)", "minilm+truncate...cision=binary)", "splade", "colbert"}
    assert {t.get_text() for t in size_panel.texts} == labels
    assert fig.axes[2].get_title() == BINARY_INDEX and len(fig.axes[2].containers) == 2
    assert cost_figure({}) is None
