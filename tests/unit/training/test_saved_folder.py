"""A trained run's folder, as a new user meets it: ``SentenceTransformer(folder)`` loads it as it is
(from ``.save(d)`` and from ``train --out d``), with the harness's vectors; ``--name`` makes the run
resolve by its name from anywhere; a name given in Python is the one results show; and a folder
written before the model's files sat beside the manifest (``model/``) still loads and evaluates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import benchharness
from tests.helpers import cli

SENTENCES = [
    f"sentence {i} talks about {w} and {v} ."
    for i, (w, v) in enumerate(
        zip(
            ["cats", "dogs", "rain", "music", "trains", "bread", "chess", "rivers"] * 5,
            ["maps", "tea", "snow", "glass", "wood", "salt", "ink", "wool"] * 5,
        )
    )
]
PROBES = ["a man plays a guitar on the street", "rain falls", "two dogs run in a field of snow and ice today"]
#: what train --out writes: 3 steps of 8 sentences, no dev evaluation, one thread
FLAGS = ["--max-steps", "3", "--batch-size", "8", "--max-length", "16", "--eval-every", "0", "--threads", "1", "-q"]


@pytest.fixture
def runs(project, monkeypatch) -> Path:
    """The runs folder of this test alone (``--name`` registers runs there)."""
    monkeypatch.setenv("BENCHHARNESS_RUNS", str(project / "runs"))
    return project / "runs"


def trained_out(project: Path, base: Path, out: str, *flags: str) -> Path:
    (project / "corpus.txt").write_text("".join(f"{s}\n" for s in SENTENCES))
    argv = ["train", "simcse", "--base", str(base), "--data", "corpus.txt", "--out", out, *FLAGS, *flags]
    done = cli(project, *argv)
    assert done.returncode == 0, done.stderr
    return project / out


def test_sentence_transformers_loads_the_folder_that_train_out_and_save_write(project, runs, tiny_bert):
    from sentence_transformers import SentenceTransformer

    from benchharness.evaluation.resolver import Resolver

    folder = trained_out(project, tiny_bert, "cli")
    harness = Resolver(train_missing=False).get(str(folder))
    loaded = SentenceTransformer(str(folder), device="cpu")  # the folder itself: no "Unrecognized model"
    np.testing.assert_allclose(loaded.encode(PROBES), harness.encode(PROBES), atol=1e-5)

    model = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, max_steps=3, batch_size=8)
    saved = model.save(project / "saved")
    np.testing.assert_allclose(
        SentenceTransformer(str(saved), device="cpu").encode(PROBES), model.encode(PROBES), atol=1e-5
    )


def test_the_weights_are_written_once_by_save(project, tiny_bert, monkeypatch):
    """``.save(d)`` writes the encoder's weights once: sentence-transformers' files are added beside
    them, not the whole model rewritten."""
    from transformers import modeling_utils

    writes: list[str] = []
    original = modeling_utils.safe_save_file  # what every save_pretrained of a model writes its weights with

    def counting(tensors, filename, *args, **kwargs):
        writes.append(Path(filename).name)
        return original(tensors, filename, *args, **kwargs)

    model = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, max_steps=1, batch_size=8)
    monkeypatch.setattr(modeling_utils, "safe_save_file", counting)
    model.save(project / "saved")
    assert writes.count("model.safetensors") == 1, writes


def test_a_name_given_to_train_out_resolves_from_anywhere(project, runs, tiny_bert, tmp_path_factory):
    folder = trained_out(project, tiny_bert, "mine", "--name", "my-simcse")
    assert json.loads((folder / "manifest.json").read_text())["name"] == "my-simcse"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    done = cli(elsewhere, "run", "--encoders", "my-simcse", "--tasks", "SICKRelatedness-trial", "--no-cache", "-q")
    assert done.returncode == 0, done.stderr
    assert "my-simcse" in done.stdout
    # a name the runs folder gives another run is refused before anything trains
    taken = cli(project, "train", "simcse", "--base", str(tiny_bert), "--out", "third", "--name", "my-simcse", "-q")
    assert taken.returncode == 2 and "already has 'my-simcse'" in taken.stderr
    assert not (project / "third").exists()


def test_a_name_given_in_python_is_the_one_results_show(tiny_bert, data_dir):
    model = benchharness.train(
        "simcse", base=str(tiny_bert), sentences=SENTENCES, max_steps=2, batch_size=8, name="my-simcse"
    )
    assert model.name == "my-simcse" and model.manifest["name"] == "my-simcse"
    results = benchharness.evaluate(model, "SICKRelatedness-trial", data_dir=data_dir, intervals=False)
    assert results.results[0].encoder == "my-simcse"
    default = benchharness.train("simcse", base=str(tiny_bert), sentences=SENTENCES, max_steps=2, batch_size=8)
    assert default.name == f"trained:recipe:{default.recipe['key']}"


def test_a_folder_written_before_the_layout_change_still_loads_and_evaluates(project, runs, tiny_bert, data_dir):
    """The earlier layout (the model's files in ``model/``, the manifest's encoder ``"model": "model"``),
    made from a run of today: it evaluates to the same score, is a base for another run, and
    ``--overwrite`` may clear it."""
    from sentence_transformers import SentenceTransformer

    from benchharness.training.base_model import base_folder

    new = trained_out(project, tiny_bert, "new")
    old = project / "old"
    old.mkdir()
    (old / "model").mkdir()
    for entry in new.iterdir():
        target = old / entry.name if entry.name in ("manifest.json", "metrics.jsonl") else old / "model" / entry.name
        (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, target)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["encoder"]["model"] = "model"
    (old / "manifest.json").write_text(json.dumps(manifest))

    def score(folder: Path) -> float:
        found = benchharness.evaluate(str(folder), "SICKRelatedness-trial", data_dir=data_dir, intervals=False)
        return found.results[0].main_score

    assert score(old) == score(new)
    assert base_folder(str(old), runs) == str(old / "model")
    np.testing.assert_allclose(
        SentenceTransformer(str(old / "model"), device="cpu").encode(PROBES),
        SentenceTransformer(str(new), device="cpu").encode(PROBES),
        atol=1e-6,
    )
    again = trained_out(project, tiny_bert, "old", "--overwrite")
    assert not (again / "model").exists() and (again / "model.safetensors").is_file()
