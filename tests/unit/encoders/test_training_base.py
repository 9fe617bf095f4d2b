"""One rule for what ``--base`` names, shared by every method: a hub id or model folder as is, a run
folder or a registered run name as its saved model, and a run that holds no model refused."""

from __future__ import annotations

import json

import pytest

from benchharness.core.settings import Config
from benchharness.encoders.methods.base_model import base_folder


def _run(folder, encoder, name=None):
    (folder / "model").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"name": name or folder.name, "encoder": encoder}))
    return folder


def test_plain_names_pass_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr("benchharness.core.settings.load_config", lambda: Config(runs_dir=tmp_path / "runs"))
    assert base_folder("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    (tmp_path / "plain").mkdir()
    assert base_folder(str(tmp_path / "plain")) == str(tmp_path / "plain")


def test_run_folder_and_registered_name_give_the_model(tmp_path, monkeypatch):
    run = _run(tmp_path / "runs" / "sup-stage", {"type": "hf", "model": "model", "pooling": "avg"}, name="stage-1")
    monkeypatch.setattr("benchharness.core.settings.load_config", lambda: Config(runs_dir=tmp_path / "runs"))
    assert base_folder(str(run)) == str(run / "model")
    assert base_folder("stage-1") == str(run / "model")  # the name the manifest declares


def test_a_run_without_a_trained_model_is_refused(tmp_path):
    run = _run(tmp_path / "tuned", {"type": "compose", "spec": "minilm-l3+whitening(k=95)"})
    with pytest.raises(ValueError, match="not a trained Hugging Face model"):
        base_folder(str(run))
    (run / "manifest.json").write_text('{"encoder": ')
    with pytest.raises(ValueError, match="invalid JSON at line 1"):
        base_folder(str(run))
