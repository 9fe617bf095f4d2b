"""A two-stage pipeline on an mteb retrieval task: the toy models of ``tests.pipeline_helpers`` on
their queries and documents as an in-memory mteb task, scored by mteb's own evaluation, against the
same pipeline on the same data as a BEIR folder (the same lists, so the same nDCG and MRR), with the
first stage's scores beside the pipeline's and a run file found by mteb's ids."""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
mteb = pytest.importorskip("mteb")

import benchharness  # noqa: E402
from benchharness.mteb_bridge import evaluate as bridge  # noqa: E402
from benchharness.mteb_bridge.as_task import MtebTask  # noqa: E402
from benchharness.mteb_bridge.memory import retrieval_task  # noqa: E402
from benchharness.tasks.files import declarations  # noqa: E402
from benchharness.tasks.files.declarations import register_file_task  # noqa: E402
from tests.pipeline_helpers import DOCS, FAMILY, QRELS, QUERIES, write_beir, write_run  # noqa: E402

PIPELINE = "toy:first>>toy:judge?k=3"


def _task():
    return retrieval_task(
        "XToy",
        {f"q{i}": q for i, q in enumerate(QUERIES)},
        {f"d{i}": d for i, d in enumerate(DOCS)},
        {f"q{q}": {f"d{d}": 1 for d in docs} for q, docs in QRELS.items()},
    )


def test_a_pipeline_scores_an_mteb_retrieval_task_as_it_scores_the_same_beir_folder(
    project, monkeypatch, register_plugin
):
    register_plugin("families", "toy", FAMILY)
    monkeypatch.setattr(declarations, "REGISTERED", {})
    register_file_task("toy-beir", write_beir(project / "beir"), kind="retrieval")
    monkeypatch.setattr(bridge, "get_task", lambda name: _task())
    run = write_run(project / "first.trec")

    [beir] = benchharness.evaluate(PIPELINE, "toy-beir", intervals=False)
    on_mteb = benchharness.evaluate([PIPELINE, f"run:{run}>>toy:judge?k=3"], [MtebTask("XToy")], intervals=False)
    ours, from_file = (r.metrics for r in on_mteb)

    assert ours["test/default/ndcg_at_10"] == pytest.approx(beir.metrics["ndcg@10"], abs=1e-3)
    assert ours["test/default/mrr_at_10"] == pytest.approx(beir.metrics["mrr@10"], abs=1e-3)
    assert ours["first_stage/test/default/ndcg_at_10"] == pytest.approx(beir.metrics["first_stage/ndcg@10"], abs=1e-3)
    # the run file holds the first stage's lists, found by mteb's query and document ids
    assert from_file["test/default/ndcg_at_10"] == pytest.approx(ours["test/default/ndcg_at_10"])
