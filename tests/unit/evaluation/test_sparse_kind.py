"""The sparse kind through the runner: a sparse model runs retrieval (and pair tasks) through the
sparse view, reports sentence-transformers' sparsity figures beside the task's metrics, is refused a
task that needs dense vectors before anything is encoded, and each text's rows are computed once per
role and read back from the cache under the model's identity."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
import scipy.sparse as sp

from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.kind_models import SparseModel
from benchharness.core.prompts import DEFAULT, Role
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task

LETTERS = "abcdefghijklmnopqrstuvwxyz"
DOCUMENTS = ["the cat sat", "a dog ran far", "cats and dogs", "zebra quiz", "the hat"]
QUERIES = {"q0": ("cat", {"d0", "d2"}), "q1": ("dog run", {"d1"}), "q2": ("quiz", {"d3"})}


class _Letters(SparseModel):
    """A sparse model of letter counts (one column a letter); it records what it encodes, by role."""

    role_aware = True

    def __init__(self) -> None:
        super().__init__("toy-letters")
        self.encoded: list[tuple[str, list[str]]] = []

    def encode_sparse(self, sentences: Sequence[str], role: Role = DEFAULT):
        self.encoded.append((str(role), list(sentences)))
        return _letter_counts(sentences)

    @property
    def vocabulary_size(self) -> int:
        return len(LETTERS)

    def identity_info(self) -> dict:
        return {"family": "toy", "rows": "letter counts"}


def _letter_counts(sentences: Sequence[str]) -> sp.csr_matrix:
    dense = np.array([[s.count(c) for c in LETTERS] for s in sentences], dtype=np.float32)
    return sp.csr_matrix(dense.reshape(len(sentences), len(LETTERS)))


@pytest.fixture
def beir_task(tmp_path, monkeypatch):
    monkeypatch.setattr(declarations, "REGISTERED", {})
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCUMENTS))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _) in QUERIES.items())
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, rel) in QUERIES.items() for d in rel)
    )
    register_file_task("beir-letters", folder, kind="retrieval")
    return tasks.get("beir-letters")


def _run(model, task_names, data_dir, cache_dir=None):
    return run(
        [model.name],
        [tasks.get(name) for name in task_names],
        lambda _: model,
        DataRoot(data_dir),
        None,
        RunSettings(data_dir=data_dir, cache_dir=cache_dir, intervals=False),
    ).outcomes


def test_a_sparse_model_searches_by_dot_product_and_is_refused_a_vector_task(data_dir, beir_task):
    model = _Letters()
    refused, scored = _run(model, ["MR", "beir-letters"], data_dir)
    assert (refused.task, refused.status) == ("MR", "failed") and "\n" not in refused.message
    assert "toy-letters is a sparse encoder (one vocabulary-sized vector per text, few terms active), and MR" in (
        refused.message
    )
    assert sorted(text for _, texts in model.encoded for text in texts) == sorted(
        DOCUMENTS + [t for t, _ in QUERIES.values()]
    )  # only the retrieval task's texts were encoded

    result = scored.result
    assert scored.status == "computed" and result.protocol["model_kind"] == "sparse"
    queries, docs = _letter_counts([t for t, _ in QUERIES.values()]).toarray(), _letter_counts(DOCUMENTS).toarray()
    # nDCG@10 of the dot-product ranking (score desc, then corpus order), by hand
    ndcg = []
    for q, (_, rel) in zip(queries, QUERIES.values()):
        ranked = sorted(range(len(DOCUMENTS)), key=lambda d: (-(q @ docs[d]), d))
        dcg = sum(1 / np.log2(r + 2) for r, d in enumerate(ranked) if f"d{d}" in rel)
        ndcg.append(dcg / sum(1 / np.log2(r + 2) for r in range(len(rel))))
    assert result.metrics["ndcg@10"] == pytest.approx(100 * np.mean(ndcg))
    assert result.metrics["query_active_dims"] == pytest.approx((queries > 0).sum(1).mean())
    assert result.metrics["corpus_active_dims"] == pytest.approx((docs > 0).sum(1).mean())
    assert result.metrics["avg_flops"] == pytest.approx((queries > 0).mean(0) @ (docs > 0).mean(0))
    assert result.metrics["index_bytes"] == 8 * (docs > 0).sum() + 4 * (len(DOCUMENTS) + 1)


def test_rows_are_computed_once_per_role_and_read_back_from_the_cache(data_dir, beir_task, tmp_path):
    model = _Letters()
    [first] = _run(model, ["beir-letters"], data_dir, tmp_path / "cache")
    assert {role for role, _ in model.encoded} == {"query", "document"}
    model.encoded.clear()
    [again] = _run(model, ["beir-letters"], data_dir, tmp_path / "cache")
    assert model.encoded == []  # every row came from the cache
    assert again.result.metrics == first.result.metrics
