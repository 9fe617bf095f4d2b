"""Pooling variants on a tiny random BERT, each recomputed by hand from the raw model outputs."""

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from benchharness.encoders.huggingface import HFEncoder

SENTENCES = ["a man is playing a guitar .", "hello", "the cat sat on the mat and looked very happy ."]


@pytest.fixture(scope="module")
def reference(tiny_bert):
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    rows = []
    with torch.no_grad():
        for s in SENTENCES:  # one at a time: no padding at all
            enc = tok([s], return_tensors="pt")
            out = model(**enc, output_hidden_states=True)
            hs = [h[0].numpy() for h in out.hidden_states]
            rows.append(
                {
                    "cls": out.pooler_output[0].numpy(),
                    "cls_before_pooler": hs[-1][0],
                    "avg": hs[-1].mean(0),
                    "avg_top2": ((hs[-1] + hs[-2]) / 2).mean(0),
                    "first_last_0": ((hs[0] + hs[-1]) / 2).mean(0),
                    "first_last_1": ((hs[1] + hs[-1]) / 2).mean(0),
                }
            )
    return rows


@pytest.mark.parametrize(
    "pooling,key,kw",
    [
        ("cls", "cls", {}),
        ("cls_before_pooler", "cls_before_pooler", {}),
        ("avg", "avg", {}),
        ("avg_top2", "avg_top2", {}),
        ("avg_first_last", "first_last_0", {"first_layer": 0}),
        ("avg_first_last", "first_last_1", {"first_layer": 1}),
    ],
)
def test_pooling_matches_unpadded_reference(tiny_bert, reference, pooling, key, kw):
    # batched encoding pads the short sentences: the masked pooling must ignore the padding
    enc = HFEncoder("tiny", str(tiny_bert), pooling=pooling, batch_size=3, **kw)
    got = enc.encode(SENTENCES)
    assert got.dtype == np.float32 and got.shape == (3, 32)
    np.testing.assert_allclose(got, np.stack([r[key] for r in reference]), atol=1e-5)


def test_prompt_pooling_takes_the_mask_state(tiny_bert):
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    text = f'This sentence : "{SENTENCES[0]}" means {tok.mask_token} .'
    enc = tok([text], return_tensors="pt")
    pos = enc["input_ids"][0].tolist().index(tok.mask_token_id)
    with torch.no_grad():
        expected = model(**enc).last_hidden_state[0, pos].numpy()
    got = HFEncoder("tiny", str(tiny_bert), pooling="prompt").encode(SENTENCES[:2])
    np.testing.assert_allclose(got[0], expected, atol=1e-5)


def test_order_is_kept_and_identity_tracks_settings(tiny_bert):
    enc = HFEncoder("tiny", str(tiny_bert), pooling="avg", batch_size=2)
    forward = enc.encode(SENTENCES)
    backward = enc.encode(SENTENCES[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-5)
    ids = {HFEncoder("t", str(tiny_bert), pooling=p).identity for p in ("cls", "avg", "avg_top2")}
    assert len(ids) == 3
    assert HFEncoder("t", str(tiny_bert), pooling="avg", batch_size=7).identity == enc.identity


def test_unknown_pooling_and_cpu_half_precision_rejected(tiny_bert):
    with pytest.raises(ValueError, match="unknown pooling"):
        HFEncoder("t", str(tiny_bert), pooling="median")
    with pytest.raises(ValueError, match="needs a CUDA device"):
        HFEncoder("t", str(tiny_bert), pooling="avg", device="cpu", precision="fp16")
