"""A trained run loads with ``SentenceTransformer(path)`` and gives the harness's vectors and scores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from benchharness.encoders.sentence_transformers_format import EXPORTABLE, save_as_sentence_transformer
from benchharness.evaluation.resolver import Resolver
from tests.helpers import HF_CACHE, MINILM_L3, cli, train_tiny_run

SENTENCES = [
    "a man is playing a guitar .",
    "the red car hit a bus",
    "two dogs run in the field",
    "a child reads a book about the sea and the old lighthouse on the hill",
]


@pytest.mark.parametrize("pooling", EXPORTABLE)
def test_every_exportable_pooling_gives_the_harness_vectors(tiny_bert, tmp_path, pooling):
    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert, folder)
    expected = Resolver().get(f"hf:{folder}?pooling={pooling}").encode(SENTENCES)
    save_as_sentence_transformer(folder, {"pooling": pooling, "max_length": 512})
    assert json.loads((folder / "modules.json").read_text())[0]["type"].endswith("Transformer")
    got = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)


def test_prompt_pooling_is_refused_with_the_reason(tiny_bert, tmp_path):
    with pytest.raises(ValueError, match="no sentence-transformers equivalent"):
        save_as_sentence_transformer(tiny_bert, {"pooling": "prompt"})


def _train_and_run(project: Path, base: str, task: str = "STSBenchmark") -> dict:
    """``train simcse`` for 2 steps into ``run/``, then ``run`` it on ``task``: the stored result."""
    train = train_tiny_run(project, base, "run")
    assert train.returncode == 0, train.stderr
    evaluate = cli(project, "run", "--encoders", "run", "--tasks", task, "--quiet", "--no-cache", "--add-items")
    assert evaluate.returncode == 0, evaluate.stderr
    return json.loads(next((project / "results").rglob(f"{task}.json")).read_text())


def _cosines(project: Path, data_dir: Path, task_name: str = "STSBenchmark") -> tuple[np.ndarray, np.ndarray]:
    """Cosines of a task's pairs from ``SentenceTransformer("run")``, and the gold scores."""
    from sentence_transformers import SentenceTransformer

    from benchharness import tasks
    from benchharness.core.data_root import DataRoot

    task = tasks.get(task_name)
    task.load(DataRoot(data_dir))
    ((first, second, gold),) = task.subsets.values()  # the sentences as the harness's protocol reads them
    model = SentenceTransformer(str(project / "run"), device="cpu")
    a, b = (model.encode(list(s), convert_to_numpy=True, batch_size=64) for s in (first, second))
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1), np.asarray(gold)


def test_a_trained_tiny_run_gives_its_stored_cosines_through_sentence_transformers(project, tiny_bert, data_dir):
    """A random tiny model puts every STS-B cosine within 3e-5 of 1, where float noise of 1e-7 reorders
    ranks and moves Spearman by 0.05: the per-pair cosines stored with the result are what must
    agree. The score itself is checked on a real model below."""
    result = _train_and_run(project, str(tiny_bert))
    stored = np.load(next((project / "results").rglob("STSBenchmark.items*.npz")))["cosine"]
    cosine, _ = _cosines(project, data_dir)
    np.testing.assert_allclose(cosine, stored, atol=1e-6)
    assert result["encoder_metadata"]["training"]["method"] == "simcse"


@pytest.mark.skipif(
    not (HF_CACHE / f"models--{MINILM_L3.replace('/', '--')}").is_dir(),
    reason=f"{MINILM_L3} is not in the hub cache {HF_CACHE}",
)
def test_a_trained_minilm_run_reproduces_its_stored_sts_score_through_sentence_transformers(project, data_dir):
    """On SICK's trial split (500 pairs): the same check as STS-B test, at a fifth of the encoding."""
    result = _train_and_run(project, MINILM_L3, "SICKRelatedness-trial")
    cosine, gold = _cosines(project, data_dir, "SICKRelatedness-trial")
    assert 100 * spearmanr(cosine, gold)[0] == pytest.approx(result["main_score"], abs=0.01)


def test_push_stages_a_loadable_model_with_a_card_whose_model_index_holds_the_stored_scores(
    project, tiny_bert, data_dir
):
    import yaml
    from sentence_transformers import SentenceTransformer

    result = _train_and_run(project, str(tiny_bert))
    done = cli(project, "push", "run", "--stage-only", "--stage", "upload")
    assert done.returncode == 0, done.stderr
    staged = project / "upload"
    assert {"modules.json", "README.md", "benchharness_manifest.json", "config.json"} <= {
        p.name for p in staged.iterdir()
    }
    model = SentenceTransformer(str(staged), device="cpu")
    expected = SentenceTransformer(str(project / "run"), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(model.encode(SENTENCES), expected, atol=1e-6)
    text = (staged / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    (entry,) = front["model-index"]
    (sts_b,) = [r for r in entry["results"] if r["dataset"]["name"] == "STSBenchmark"]
    assert sts_b["metrics"][0]["value"] == round(result["main_score"], 2)
    assert front["library_name"] == "sentence-transformers"
    assert "benchharness train simcse" in text and f"{result['main_score']:.2f}" in text
    missing = cli(project, "push", "run")
    assert missing.returncode == 2 and "--repo-id" in missing.stderr
