"""The mask token read from a tokenizer folder's JSON files (``benchharness.encoders.tokenizer_files``) is the
one transformers' loaded tokenizer reports, and encoders answer it without loading their model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchharness.encoders.tokenizer_files import declared_token, sentence_transformer_tokenizer_folder
from tests.helpers import MINILM_L3, MINILM_L6


def write(folder: Path, name: str, data: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_string_and_added_token_forms(tmp_path):
    write(tmp_path / "a", "special_tokens_map.json", {"mask_token": "[MASK]"})
    write(tmp_path / "b", "tokenizer_config.json", {"mask_token": {"content": "<mask>", "lstrip": True}})
    assert declared_token(tmp_path / "a") == "[MASK]"
    assert declared_token(tmp_path / "b") == "<mask>"


def test_undeclared_unreadable_or_disagreeing_files_give_none(tmp_path):
    write(tmp_path / "none", "tokenizer_config.json", {"cls_token": "[CLS]"})
    write(tmp_path / "bad", "special_tokens_map.json", "{not json")
    write(tmp_path / "split", "special_tokens_map.json", {"mask_token": "[MASK]"})
    write(tmp_path / "split", "tokenizer_config.json", {"mask_token": "<mask>"})
    (tmp_path / "empty").mkdir()
    for case in ("none", "bad", "split", "empty"):
        assert declared_token(tmp_path / case) is None, case


def test_the_transformer_module_folder_of_a_sentence_transformers_model(tmp_path):
    write(
        tmp_path,
        "modules.json",
        [
            {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ],
    )
    assert sentence_transformer_tokenizer_folder(tmp_path) == tmp_path / "0_Transformer"
    assert sentence_transformer_tokenizer_folder(tmp_path / "missing") is None


def test_declared_equals_the_loaded_tokenizer_of_a_tiny_bert(tiny_bert):
    from transformers import AutoTokenizer

    assert declared_token(tiny_bert) == AutoTokenizer.from_pretrained(str(tiny_bert)).mask_token


@pytest.mark.parametrize("model", [MINILM_L6, MINILM_L3])
def test_st_and_hf_encoders_answer_the_mask_token_without_loading(model):
    from transformers import AutoTokenizer

    from benchharness.encoders.huggingface import HFEncoder
    from benchharness.encoders.sbert import SentenceTransformerEncoder

    try:
        st, hf = SentenceTransformerEncoder("st", model), HFEncoder("hf", model, pooling="avg")
    except Exception as error:
        pytest.skip(f"{model}: {error}")
    expected = AutoTokenizer.from_pretrained(str(st.source.path)).mask_token
    assert st.mask_token == hf.mask_token == expected
    assert st._model is None and hf._tokenizer is None and hf._model is None
