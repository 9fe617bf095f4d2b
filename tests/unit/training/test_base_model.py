"""One rule for what ``--base`` names, shared by every method: a hub id or model folder as is, a run
folder or a registered run name as its saved model, and a run that holds no model refused."""

from __future__ import annotations

import json

import pytest

from benchharness.core.errors import InvalidInputError
from benchharness.training.base_model import base_folder


def _run(folder, encoder, name=None):
    (folder / "model").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"name": name or folder.name, "encoder": encoder}))
    return folder


def test_plain_names_pass_unchanged(tmp_path):
    assert (
        base_folder("sentence-transformers/all-MiniLM-L6-v2", tmp_path / "runs")
        == "sentence-transformers/all-MiniLM-L6-v2"
    )
    (tmp_path / "plain").mkdir()
    assert base_folder(str(tmp_path / "plain"), tmp_path / "runs") == str(tmp_path / "plain")


def test_run_folder_and_registered_name_give_the_model(tmp_path):
    run = _run(tmp_path / "runs" / "sup-stage", {"type": "hf", "model": "model", "pooling": "avg"}, name="stage-1")
    assert base_folder(str(run), tmp_path / "runs") == str(run / "model")
    assert base_folder("stage-1", tmp_path / "runs") == str(run / "model")  # the name the manifest declares


def test_a_run_without_a_trained_model_is_refused(tmp_path):
    run = _run(tmp_path / "tuned", {"type": "compose", "spec": "minilm-l3+whitening(k=95)"})
    with pytest.raises(ValueError, match="not a trained Hugging Face model"):
        base_folder(str(run), tmp_path / "runs")
    (run / "manifest.json").write_text('{"encoder": ')
    with pytest.raises(ValueError, match="invalid JSON at line 1"):
        base_folder(str(run), tmp_path / "runs")


# --------------------------------------------------------------------------- loading: one checked rule


def _without(folder, tmp_path, weight: str):
    """A copy of ``folder`` whose safetensors file lacks ``weight``."""
    import shutil

    from safetensors.torch import load_file, save_file

    damaged = tmp_path / "damaged"
    shutil.copytree(folder, damaged)
    state = load_file(str(damaged / "model.safetensors"))
    del state[weight]
    save_file(state, str(damaged / "model.safetensors"), metadata={"format": "pt"})
    return damaged


MISSING = "encoder.layer.0.attention.self.query.weight"


def test_a_base_with_a_missing_weight_is_refused_by_training_and_hf_alike(tiny_bert, tmp_path):
    from benchharness.core.errors import UserError
    from benchharness.encoders.huggingface import HFEncoder
    from benchharness.training.base_model import load_base

    damaged = _without(tiny_bert, tmp_path, MISSING)
    with pytest.raises(UserError) as training:
        load_base(str(damaged))
    with pytest.raises(UserError) as evaluation:
        _ = HFEncoder("t", str(damaged), pooling="avg").model  # the model loads on first use
    message = str(training.value)
    assert "\n" not in message and MISSING in message and "1 encoder weights of BertModel" in message
    assert str(evaluation.value) == message  # one loader, one refusal


def test_a_base_without_a_tokenizer_is_refused_before_loading(tiny_bert, tmp_path):
    import shutil

    from benchharness.training.base_model import load_base

    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert / name, bare / name)
    with pytest.raises(ValueError, match=r"ships no tokenizer .*vocab\.txt"):
        load_base(str(bare))


def test_a_pooler_less_checkpoint_loads_where_the_pooler_is_unused():
    from benchharness.encoders.checkpoint import checkpoint_keys
    from benchharness.encoders.huggingface import HFEncoder
    from benchharness.training.base_model import load_base
    from tests.helpers import MINILM_L3

    encoder = HFEncoder("t", MINILM_L3, pooling="avg")
    assert not any("pooler" in k for k in checkpoint_keys(encoder.source.path))  # the case at hand
    assert encoder.model.pooler is not None  # loaded, its pooler newly initialised and unused
    model, tokenizer, _ = load_base(MINILM_L3)  # a base: the method trains the pooler or pools without it
    assert type(model).__name__ == "BertModel" and tokenizer.vocab_size == 30522
    with pytest.raises(ValueError, match=r"pooling 'cls' on .*no pooler weights"):
        HFEncoder("t", MINILM_L3, pooling="cls")


@pytest.fixture
def unusual_verbosity():
    """transformers at INFO and huggingface_hub at DEBUG (neither library's default), restored after."""
    import huggingface_hub.utils.logging as hub_logging
    import transformers

    before = transformers.logging.get_verbosity(), hub_logging.get_verbosity()
    transformers.logging.set_verbosity(transformers.logging.INFO)
    hub_logging.set_verbosity(hub_logging.logging.DEBUG)
    yield lambda: (transformers.logging.get_verbosity(), hub_logging.get_verbosity())
    transformers.logging.set_verbosity(before[0])
    hub_logging.set_verbosity(before[1])


def test_loading_leaves_both_libraries_verbosity_as_found(tiny_bert, tmp_path, unusual_verbosity, caplog):
    import logging

    from transformers.utils import logging as hf_logging

    from benchharness.training.base_model import load_base

    found = unusual_verbosity()
    assert found == (logging.INFO, logging.DEBUG)
    bars = hf_logging.is_progress_bar_enabled()
    load_base(str(tiny_bert))
    assert unusual_verbosity() == found
    damaged = _without(tiny_bert, tmp_path, MISSING)
    with caplog.at_level(logging.DEBUG, logger="benchharness.encoders.checkpoint"), pytest.raises(ValueError):
        load_base(str(damaged))
    assert unusual_verbosity() == found and hf_logging.is_progress_bar_enabled() == bars
    # transformers' load report went to the harness's debug log, not the console
    assert any(MISSING in r.getMessage() for r in caplog.records if r.name == "benchharness.encoders.checkpoint")
    assert not logging.getLogger("transformers.modeling_utils").filters


def test_a_sentence_transformers_folder_with_a_missing_weight_is_refused_as_hf_is(tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from benchharness.evaluation.resolver import Resolver

    word = Transformer(str(tiny_bert), max_seq_length=32)
    folder = tmp_path / "st"
    SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device="cpu").save(str(folder))
    assert Resolver().get(f"st:{folder}").encode(["a sentence"]).shape == (1, 32)  # complete: loads
    damaged = _without(folder, tmp_path, MISSING)
    with pytest.raises(InvalidInputError, match=MISSING.replace(".", r"\.")):
        Resolver().get(f"st:{damaged}").encode(["a sentence"])
