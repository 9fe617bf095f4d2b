"""The last layer computed at the first position only (``encoders/first_token.py``), against the
whole model: the same [CLS] state and pooler output up to float rounding, for BERT and RoBERTa
layers, under the encoders that use it; anything it does not reproduce runs the whole model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchharness.encoders import first_token
from benchharness.encoders.backends import EagerBackend
from benchharness.encoders.huggingface import HFEncoder
from tests.helpers import MINILM_L3

SENTENCES = [
    "a man is playing a guitar .",
    "two dogs run across a snowy field",
    "the cat sleeps",
    "a woman slices an onion with a large knife",
    "rain",
]


def _inputs(model_folder, sentences, length=None):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_folder))
    enc = tokenizer(sentences, padding="max_length", max_length=length or 12, truncation=True, return_tensors="pt")
    return {k: v for k, v in enc.items() if k != "attention_mask"}  # equal-length rows, as the engine makes


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_the_first_position_equals_the_whole_models(kind, tiny_bert, tmp_path):
    """[CLS] after the last layer and the pooler output, whole model against first position only:
    equal to float rounding (1e-6 on unit-scale states), with a 3-layer model and batches of one
    and five rows."""
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    torch.manual_seed(0)
    if kind == "bert":
        model = BertModel(
            BertConfig(
                vocab_size=30522, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=128
            )
        )
    else:
        model = RobertaModel(
            RobertaConfig(
                vocab_size=30522,
                hidden_size=64,
                num_hidden_layers=3,
                num_attention_heads=4,
                intermediate_size=128,
                pad_token_id=1,
            )
        )
    model.eval()
    assert first_token.supported(model)
    for sentences in (SENTENCES[:1], SENTENCES):
        inputs = _inputs(tiny_bert, sentences)
        with torch.inference_mode():
            whole = model(**inputs)
            first = first_token.outputs(model, inputs)
        assert first.last_hidden_state.shape == (len(sentences), 1, 64)
        torch.testing.assert_close(first.last_hidden_state[:, 0], whole.last_hidden_state[:, 0], atol=1e-6, rtol=0)
        torch.testing.assert_close(first.pooler_output, whole.pooler_output, atol=1e-6, rtol=0)
        assert not torch.equal(whole.last_hidden_state[:, 1], whole.last_hidden_state[:, 0])  # positions differ


def test_training_mode_relative_positions_and_other_layers_run_the_whole_model(tiny_bert):
    from transformers import AutoModel, BertConfig, BertModel

    model = AutoModel.from_pretrained(str(tiny_bert))
    assert not first_token.supported(model.train())
    assert first_token.supported(model.eval())
    relative = BertModel(
        BertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            position_embedding_type="relative_key",
        )
    ).eval()
    assert not first_token.supported(relative)
    assert not first_token.supported(torch.nn.Linear(2, 2))
    backend = EagerBackend(model.eval(), first_token=True)
    inputs = _inputs(tiny_bert, SENTENCES)
    assert backend(inputs).last_hidden_state.shape[1] == 1
    assert backend(inputs, output_hidden_states=True).last_hidden_state.shape[1] == 12  # layers asked: whole model


@pytest.mark.parametrize("pooling", ["cls_before_pooler", "cls"])
def test_cls_encoders_take_the_first_position_path_and_keep_their_vectors(pooling, tiny_bert, monkeypatch):
    """An hf: encoder pooled at [CLS] computes its last layer at the first position only; its
    vectors are the whole model's within 1e-6, its identity unchanged."""
    calls = []
    real = first_token.outputs
    monkeypatch.setattr(first_token, "outputs", lambda *a: calls.append(1) or real(*a))
    fast = HFEncoder("t", str(tiny_bert), pooling=pooling, max_length=32)
    got = fast.encode(SENTENCES)
    assert calls
    monkeypatch.setattr(first_token, "supported", lambda model: False)
    whole = HFEncoder("t", str(tiny_bert), pooling=pooling, max_length=32)
    np.testing.assert_allclose(got, whole.encode(SENTENCES), atol=1e-6, rtol=0)
    assert fast.identity == whole.identity
    calls.clear()
    monkeypatch.setattr(first_token, "supported", lambda model: True)
    HFEncoder("t", str(tiny_bert), pooling="avg", max_length=32).encode(SENTENCES)
    assert not calls  # a pooling that reads every position never takes it


def test_minilm_l3_cls_vectors_on_sts_sentences(data_dir):
    """paraphrase-MiniLM-L3-v2 pooled at [CLS] (the PaSeR and SimCSE recipes' evaluation pooling):
    first position only against the whole model on 300 STS-B sentences, within 1e-5."""
    from huggingface_hub import snapshot_download

    from benchharness import tasks
    from benchharness.core.data_root import DataRoot

    task = tasks.get("STSBenchmark")
    task.load(DataRoot(data_dir))
    sentences = list(dict.fromkeys(task.sentences()))[:300]
    folder = snapshot_download(MINILM_L3, local_files_only=True)
    fast = HFEncoder("l3", folder, pooling="cls_before_pooler").encode(sentences)
    original = first_token.supported
    try:
        first_token.supported = lambda model: False
        whole = HFEncoder("l3", folder, pooling="cls_before_pooler").encode(sentences)
    finally:
        first_token.supported = original
    assert np.abs(fast - whole).max() <= 1e-5
