"""``st:`` on a cross-encoder folder, and a ``CrossEncoder`` object given to ``evaluate``: loaded as a
cross-encoder (never converted into a dense model), scored as ``CrossEncoder.predict`` scores, pinned
by what decides a score (compared with what sentence-transformers itself loads), and refused in one
line where a task needs vectors or the model gives no single score for a pair.

The model is MiniLM-L3's encoder with a seeded head (``tests.helpers.make_cross_encoder``), in
sentence-transformers' own layout and in the hub's older one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import benchharness
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import CROSS_ENCODER, ViewSettings
from benchharness.core.prompts import DOCUMENT, QUERY, Role
from benchharness.encoders.model_type import declared_kind
from benchharness.encoders.st_cross_encoder import CrossEncoderFolder, CrossEncoderObject
from benchharness.evaluation.kinds import model_kind
from benchharness.evaluation.resolver import Resolver
from tests.helpers import HF_CACHE, MINILM_L3, make_cross_encoder

PAIRS = [
    ("a man is playing a guitar", "a person plays an instrument"),
    ("a man is playing a guitar", "the stock market fell sharply today"),
    ("two dogs run on the beach", "dogs are running by the sea"),
    ("a woman slices an onion", "someone is cutting a vegetable in the kitchen with a large knife"),
    ("short", "x"),
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cross-encoders")
    return {
        "st": make_cross_encoder(root / "st", seed=1),
        "hub": make_cross_encoder(root / "hub", seed=1, layout="hub"),
    }


def st_model(folder: Path, **kwargs):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(folder), local_files_only=True, **kwargs)


def built(spec: str):
    return Resolver().get(spec)


def test_both_layouts_are_cross_encoders(folders):
    saved = json.loads((folders["st"] / "config_sentence_transformers.json").read_text())
    assert saved["model_type"] == "CrossEncoder"
    assert not (folders["hub"] / "modules.json").exists()
    for folder in folders.values():
        assert declared_kind(folder, "x") == CROSS_ENCODER
        encoder = built(f"st:{folder}")
        assert isinstance(encoder, CrossEncoderFolder) and encoder.model_kind == CROSS_ENCODER


@pytest.mark.parametrize("layout", ["st", "hub"])
def test_pairs_are_scored_as_crossencoder_predict_scores_them(folders, layout):
    """predict with its own batch size (its length sort makes other batches), sigmoid applied."""
    encoder = built(f"st:{folders[layout]}?batch_size=2")
    mine = encoder.score_pairs(PAIRS)
    reference = st_model(folders[layout]).predict(PAIRS, batch_size=32)
    np.testing.assert_allclose(mine, reference, atol=1e-6)
    assert mine.min() > 0 and mine.max() < 1 and np.ptp(mine) > 0.05  # sigmoid of spread logits
    np.testing.assert_allclose(built(f"st:{folders['hub']}").score_pairs(PAIRS), mine, atol=1e-6)


def test_the_identity_holds_what_sentence_transformers_loads_without_loading_it(folders, tmp_path):
    custom = make_cross_encoder(
        tmp_path / "custom", seed=1, max_length=128, activation_fn=__import__("torch").nn.Identity()
    )
    for folder in (folders["st"], folders["hub"], custom):
        encoder = built(f"st:{folder}")
        record = encoder.identity_record()
        assert encoder._model is None  # nothing loaded for an identity (a warm rerun loads nothing)
        loaded = st_model(folder)
        from sentence_transformers.util import fullname

        assert record["activation_fn"] == fullname(loaded.activation_fn)
        assert record["max_length"] == loaded.max_seq_length
        assert record["kind"] == CROSS_ENCODER and record["weights_sha256"] == encoder.source.weights_sha256
        config = record["modules"]["config.json"]
        assert len(config["id2label"]) == loaded.num_labels == 1
    record = built(f"st:{custom}").identity_record()
    assert record["max_length"] == 128 and record["activation_fn"] == "torch.nn.modules.linear.Identity"
    assert built(f"st:{custom}").identity != built(f"st:{folders['st']}").identity


def test_the_default_prompt_is_applied_before_the_query_as_predict_applies_it(folders, tmp_path):
    folder = make_cross_encoder(
        tmp_path / "prompted", seed=1, prompts={"rerank": "Judge the relevance: "}, default_prompt_name="rerank"
    )
    encoder = built(f"st:{folder}")
    assert encoder.prompts.default == "Judge the relevance: "
    view = model_kind(CROSS_ENCODER).open_view(encoder, ViewSettings())
    left, right = zip(*PAIRS)
    mine = view.pairs(list(left), list(right), (QUERY, DOCUMENT))
    np.testing.assert_allclose(mine, st_model(folder).predict(PAIRS), atol=1e-6)  # predict applies it by default
    assert not np.allclose(mine, st_model(folder).predict(PAIRS, prompt=""), atol=1e-3)
    instructed = view.pairs(list(left), list(right), (Role("query", "Find a paraphrase: "), DOCUMENT))
    np.testing.assert_allclose(instructed, st_model(folder).predict(PAIRS, prompt="Find a paraphrase: "), atol=1e-6)


def test_a_classifier_of_several_labels_is_refused_when_built(tmp_path):
    folder = make_cross_encoder(tmp_path / "nli", layout="hub", labels=3)
    with pytest.raises(InvalidInputError) as caught:
        built(f"st:{folder}")
    assert str(caught.value) == (
        f"st:{folder} is a cross-encoder with 3 labels (a classifier, such as an NLI model), which gives no single "
        "score for a pair; benchharness scores pairs with one-label cross-encoders (rerankers, STS)"
    )


def test_a_folder_without_the_head_it_declares_is_refused_not_scored_at_random(tmp_path):
    """MiniLM's encoder weights under a config that declares a sequence classifier: the classifier
    and pooler would be made up at random (transformers only logs it)."""
    snapshot = next((HF_CACHE / f"models--{MINILM_L3.replace('/', '--')}" / "snapshots").iterdir())
    folder = tmp_path / "headless"
    folder.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(snapshot / name, folder / name)
    config = json.loads((snapshot / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps({**config, "architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}})
    )
    encoder = built(f"st:{folder}")
    with pytest.raises(InvalidInputError, match=r"weights of its cross-encoder are missing .*classifier") as caught:
        encoder.score_pairs(PAIRS)
    assert "\n" not in str(caught.value)


def test_a_task_that_needs_vectors_is_refused_in_one_line_before_the_model_loads(folders, monkeypatch):
    monkeypatch.setattr(CrossEncoderFolder, "model", property(lambda self: pytest.fail("the model was loaded")))
    results = benchharness.evaluate(f"st:{folders['st']}", ["MR"], errors="keep")
    assert results.failed[0].message == (
        f"st:{folders['st']} is a cross-encoder (a score for each text pair, read together), and MR needs vectors "
        "(to train a classifier on, cluster or index); a cross-encoder gives a score for each text pair. Run it on "
        "tasks that use what it gives, or choose a dense encoder for this one"
    )


def test_a_crossencoder_object_is_scored_as_one_and_left_in_its_mode(folders):
    model = st_model(folders["st"])
    model.train()
    encoder = benchharness.as_encoder(model)
    assert isinstance(encoder, CrossEncoderObject) and encoder.model_kind == CROSS_ENCODER
    np.testing.assert_allclose(encoder.score_pairs(PAIRS), built(f"st:{folders['st']}").score_pairs(PAIRS), atol=1e-6)
    assert model.training  # handed back as it came
    record = encoder.identity_record()
    assert record["activation_fn"] == "torch.nn.modules.activation.Sigmoid" and record["kind"] == CROSS_ENCODER
    assert record["max_length"] == 512 and record["modules"]["config.json"]["id2label"] == {0: "LABEL_0"}
    before = encoder.identity
    import torch

    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    assert encoder.identity != before  # the weights it holds now, hashed again outside an evaluation call
    with pytest.raises(InvalidInputError, match="identity= pins a plain callable; a CrossEncoder has an identity"):
        benchharness.as_encoder(model, identity="mine")


def test_a_rerun_reads_the_cached_scores_and_loads_no_model(folders, tmp_path, monkeypatch):
    [first] = benchharness.evaluate(f"st:{folders['st']}", "SICKRelatedness-trial", cache_dir=tmp_path, intervals=False)
    monkeypatch.setattr(CrossEncoderFolder, "model", property(lambda self: pytest.fail("the model was loaded")))
    [again] = benchharness.evaluate(f"st:{folders['st']}", "SICKRelatedness-trial", cache_dir=tmp_path, intervals=False)
    assert again.main_score == first.main_score and again.metrics["pairs_scored"] == 500
    assert again.encoder_metadata["similarity"] == "the model's pair score"
