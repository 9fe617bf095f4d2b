"""The inference engine (encoders/inference.py): batches by exact token length under a token budget,
vectors equal to the padded reference paths, bf16 only where the CPU has it, identities kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st_

import benchharness.core.devices as devices
from benchharness.encoders.huggingface import HFEncoder
from benchharness.encoders.inference import Tokens, encode_tokens, token_batches, tokenize
from benchharness.encoders.sbert import SentenceTransformerEncoder
from tests.helpers import MINILM_L3

SENTENCES = [
    "a man is playing a guitar .",
    "hello",
    "the cat sat on the mat and looked very happy .",
    "two dogs run",
    "hello",
    "A woman is slicing an onion.",
    "a man is playing a flute .",
    "x " * 150,
    "Three children are standing in a field of tall grass next to a fence and a tree.",
]


@settings(max_examples=200, deadline=None)
@given(lengths=st_.lists(st_.integers(1, 40), max_size=60), budget=st_.integers(1, 100))
def test_token_batches_cover_each_sentence_once_within_budget(lengths, budget):
    batches = list(token_batches(lengths, budget))
    flat = np.concatenate(batches) if batches else np.array([], dtype=int)
    assert sorted(flat.tolist()) == list(range(len(lengths)))
    for b in batches:
        assert len({lengths[i] for i in b}) == 1  # one exact length: no padding
        assert len(b) == 1 or len(b) * lengths[b[0]] <= budget
    firsts = [lengths[b[0]] for b in batches]
    assert firsts == sorted(firsts, reverse=True)  # longest first
    # within one length, input order; and a length's batches are full except its last
    for length in set(lengths):
        group = [b for b in batches if lengths[b[0]] == length]
        assert np.concatenate(group).tolist() == [i for i, n in enumerate(lengths) if n == length]
        assert all(len(b) == max(1, budget // length) for b in group[:-1])


def test_token_budget_must_be_positive():
    with pytest.raises(ValueError, match="token_budget"):
        list(token_batches([3, 4], 0))


def test_rows_come_back_in_input_order():
    # each "vector" is (length, first id, last id) of its own row: computable without the engine
    ids = [[7, 1, 2], [5], [9, 9], [4, 3, 8], [6], [2, 2]]
    tokens = Tokens.from_rows({"input_ids": ids})

    def run(features):
        x = features["input_ids"].float()
        assert features["attention_mask"].shape == x.shape and bool(features["attention_mask"].all())
        return torch.stack([torch.full((len(x),), float(x.shape[1])), x[:, 0], x[:, -1]], dim=1)

    got = encode_tokens(tokens, run, torch.device("cpu"), token_budget=4)
    np.testing.assert_array_equal(got, [[len(r), r[0], r[-1]] for r in ids])


def test_a_batch_that_does_not_fit_is_split_with_one_warning_and_every_vector_kept(tiny_bert, caplog):
    """A device that runs out of memory on batches of more than 3 sentences (simulated: the forward
    raises torch's OutOfMemoryError, as CUDA does): each batch is halved until it fits, the batches
    after it are capped, one warning says so, and the vectors equal those of an unconstrained run."""
    import logging

    encoder = HFEncoder("tiny", str(tiny_bert), pooling="avg", max_length=32)
    sentences = [f"sentence number {i} of the test" for i in range(40)] + ["a longer one, with more words in it"] * 3
    want = encoder.encode(sentences)
    ran: list[int] = []
    forward = encoder.model.forward

    def small_device(*args, **kwargs):
        rows = len(kwargs["input_ids"] if "input_ids" in kwargs else args[0])
        if rows > 3:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        ran.append(rows)
        return forward(*args, **kwargs)

    encoder.model.forward = small_device
    with caplog.at_level(logging.WARNING, logger="benchharness.encoders.inference"):
        got = encoder.encode(sentences)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert max(ran) <= 3 and sum(ran) == len(sentences)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "out of device memory on a batch of" in warning and "\n" not in warning


def test_a_single_sentence_that_does_not_fit_is_the_out_of_memory_error():
    tokens = Tokens.from_rows({"input_ids": [[1, 2, 3]] * 4})

    def never_fits(features):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    with pytest.raises(torch.OutOfMemoryError):
        encode_tokens(tokens, never_fits, torch.device("cpu"))


def test_tokenize_once_gives_the_padded_batch_ids_row_by_row(minilm_l3_st):
    st = minilm_l3_st
    got = tokenize(st.tokenizer, SENTENCES, st[0].max_seq_length)
    padded = st.preprocess(SENTENCES)
    for i in range(len(SENTENCES)):
        n = int(padded["attention_mask"][i].sum())
        for key in got.flat:  # input_ids, token_type_ids
            assert got.row(key, i) == padded[key][i, :n].tolist()
    assert max(got.lengths) == st[0].max_seq_length == 128  # "x " * 150 truncated


@pytest.fixture(scope="module")
def minilm_l3_st():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(MINILM_L3, device="cpu")


@pytest.fixture(scope="module")
def tiny_st(tiny_bert, tmp_path_factory):
    """A sentence-transformers model around the tiny random BERT: mean pooling, then normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    first = Transformer(str(tiny_bert), max_seq_length=64)
    model = SentenceTransformer(
        modules=[first, Pooling(first.get_embedding_dimension(), "mean"), Normalize()], device="cpu"
    )
    folder = tmp_path_factory.mktemp("tiny-st")
    model.save(str(folder))
    return folder


def test_st_encoder_matches_sentence_transformers_encode_on_tiny_bert(tiny_st):
    from sentence_transformers import SentenceTransformer

    expected = SentenceTransformer(str(tiny_st), device="cpu").encode(SENTENCES, batch_size=4)
    enc = SentenceTransformerEncoder("tiny", str(tiny_st), batch_size=1)  # 64-token batches: several per length
    got = enc.encode(SENTENCES)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)  # Normalize kept


def test_engine_is_the_default_and_reference_is_sentence_transformers_encode(tiny_st):
    from sentence_transformers import SentenceTransformer

    default = SentenceTransformerEncoder("tiny", str(tiny_st), batch_size=4)
    default.encode(SENTENCES)
    assert default._engine is not None  # the default path is the inference engine
    expected = SentenceTransformer(str(tiny_st), device="cpu").encode(SENTENCES, batch_size=4)
    reference = SentenceTransformerEncoder("tiny", str(tiny_st), batch_size=4, backend="reference")
    np.testing.assert_array_equal(reference.encode(SENTENCES), expected)  # the very same call, bit for bit
    assert reference._engine is None and reference.identity == default.identity


def test_a_model_the_engine_cannot_run_goes_through_encode_and_says_so(tiny_st, tmp_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_st), device="cpu", prompts={"query": "query: "}, default_prompt_name="query")
    model.save(str(tmp_path))  # a default prompt: the engine would encode the bare sentences
    expected = SentenceTransformer(str(tmp_path), device="cpu").encode(SENTENCES, batch_size=4)
    enc = SentenceTransformerEncoder("prompted", str(tmp_path), batch_size=4)
    np.testing.assert_array_equal(enc.encode(SENTENCES), expected)
    assert enc._engine is None
    assert enc.metadata["backend"] == "reference" and "default prompt" in enc.metadata["engine_unsupported"]
    plain = SentenceTransformerEncoder("tiny", str(tiny_st), batch_size=4)
    plain.encode(SENTENCES)
    assert plain.metadata["backend"] == "eager" and "engine_unsupported" not in plain.metadata


def test_hf_encoder_matches_per_sentence_forward(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    with torch.no_grad():  # one sentence at a time, truncated as the encoder does: no padding at all
        expected = np.stack(
            [
                model(**tok([s], truncation=True, max_length=32, return_tensors="pt"))
                .last_hidden_state[0]
                .mean(0)
                .numpy()
                for s in SENTENCES
            ]
        )
    got = HFEncoder("tiny", str(tiny_bert), pooling="avg", max_length=32, batch_size=1).encode(SENTENCES)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_minilm_l3_equals_sentence_transformers_on_sts_sentences(data_dir, minilm_l3_st):
    from benchharness import tasks
    from benchharness.core.data_root import DataRoot

    task = tasks.get("STSBenchmark")
    task.load(DataRoot(data_dir))
    sentences = list(dict.fromkeys(task.sentences()))[:200]
    expected = minilm_l3_st.encode(sentences, batch_size=64)
    got = SentenceTransformerEncoder("minilm-l3", MINILM_L3).encode(sentences)
    assert np.abs(got - expected).max() <= 1e-5


def test_fp32_eager_keeps_the_identity_it_always_had(tiny_st, tiny_bert):
    # the keys of identity_info that stored results hash: adding any would change every stored hash
    st_info = SentenceTransformerEncoder("t", str(tiny_st)).identity_info()
    assert set(st_info) == {"family", "model", "revision", "weights_sha256", "modules"}
    hf_info = HFEncoder("t", str(tiny_bert), pooling="avg").identity_info()
    assert set(hf_info) == {
        "family",
        "model",
        "revision",
        "weights_sha256",
        "pooling",
        "max_length",
        "precision",
        "normalize",
    }


def test_cpu_bf16_refused_without_native_support(monkeypatch, tiny_st, tiny_bert):
    monkeypatch.setattr(devices, "has_native_bf16", lambda: False)
    with pytest.raises(ValueError, match="avx512_bf16 or amx_bf16"):
        SentenceTransformerEncoder("t", str(tiny_st), device="cpu", precision="bf16")
    with pytest.raises(ValueError, match="avx512_bf16 or amx_bf16"):
        HFEncoder("t", str(tiny_bert), pooling="avg", device="cpu", precision="bf16")
    with pytest.raises(ValueError, match="needs a CUDA device"):  # fp16 stays GPU-only
        HFEncoder("t", str(tiny_bert), pooling="avg", device="cpu", precision="fp16")


def test_cpu_bf16_with_native_support_is_recorded_and_close(monkeypatch, tiny_st):
    monkeypatch.setattr(devices, "has_native_bf16", lambda: True)
    fp32 = SentenceTransformerEncoder("t", str(tiny_st), device="cpu")
    bf16 = SentenceTransformerEncoder("t", str(tiny_st), device="cpu", precision="bf16")
    assert bf16.identity_info()["precision"] == "bf16" and bf16.identity != fp32.identity
    a, b = fp32.encode(SENTENCES), bf16.encode(SENTENCES)
    assert 0 < np.abs(a - b).max() < 0.05  # bf16 really ran (8-bit mantissa), and stayed close


def test_onnx_backend_refuses_poolings_it_cannot_serve(tiny_bert):
    with pytest.raises(ValueError, match="backend=onnx returns only the last hidden state"):
        HFEncoder("t", str(tiny_bert), pooling="avg_top2", backend="onnx")
    with pytest.raises(ValueError, match="unknown backend"):
        HFEncoder("t", str(tiny_bert), pooling="avg", backend="tensorrt")


def test_onnx_backend_agrees_with_eager(tiny_st):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    eager = SentenceTransformerEncoder("t", str(tiny_st)).encode(SENTENCES)
    onnx = SentenceTransformerEncoder("t", str(tiny_st), backend="onnx")
    np.testing.assert_allclose(onnx.encode(SENTENCES), eager, atol=1e-5)
    assert onnx.identity == SentenceTransformerEncoder("t", str(tiny_st)).identity  # within 1e-5: same encoder
