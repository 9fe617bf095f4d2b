"""NanoBEIR through benchharness against sentence-transformers' ``NanoBEIREvaluator`` on the same hub
rows (handed to both: the evaluator's loader patched, the task's download given them), with the same
model (paraphrase-MiniLM-L3-v2): each dataset's nDCG@10, MRR@10 and MAP@100, and the mean over
the datasets, which the evaluator reports as its primary metric.

Three datasets of the helper's rows (6 queries, 40 documents each, every text distinct, so no two
documents tie): the metrics agree to 1e-6 (x100: float32 cosines summed in another order)."""

from __future__ import annotations

import pytest

import benchharness
from benchharness.tasks import nanobeir
from tests.helpers import MINILM_L3
from tests.nanobeir_helpers import hub_rows

DATASETS = {"msmarco": "MSMARCO", "nq": "NQ", "scifact": "SciFact"}
BOUND = 1e-6


def test_each_dataset_and_the_mean_equal_the_evaluators(tmp_path, monkeypatch, project):
    st_nanobeir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.nano_beir")
    from datasets import Dataset
    from huggingface_hub import snapshot_download
    from sentence_transformers import SentenceTransformer

    hub = {
        f"Nano{name}": {s: Dataset.from_list(r) for s, r in hub_rows(name, documents=40, seed=7).items()}
        for name in DATASETS.values()
    }
    monkeypatch.setattr(
        st_nanobeir.NanoBEIREvaluator,
        "_load_dataset_subset_split",
        lambda self, subset, split, required_columns: hub[split][subset],
    )
    model = SentenceTransformer(snapshot_download(MINILM_L3, local_files_only=True), device="cpu")
    evaluator = st_nanobeir.NanoBEIREvaluator(list(DATASETS), write_csv=False)
    reference = evaluator(model)

    root = tmp_path / "data"
    for name in DATASETS.values():
        nanobeir.download(name, root / "nanobeir" / f"Nano{name}", "rows", lambda r, s, split, v: hub[split][s])
    names = [f"Nano{name}" for name in DATASETS.values()]
    results = benchharness.evaluate("minilm-l3", names, data_dir=root)
    for name in names:
        ours = results.get("minilm-l3", name).metrics
        for metric in ("ndcg@10", "mrr@10", "map@100"):
            assert ours[metric] / 100 == pytest.approx(reference[f"{name}_cosine_{metric}"], abs=BOUND), (name, metric)
    mean = results.mean(names)
    assert evaluator.primary_metric == "NanoBEIR_mean_cosine_ndcg@10"
    assert mean.mean / 100 == pytest.approx(reference[evaluator.primary_metric], abs=BOUND)
    assert mean.low < mean.mean < mean.high
