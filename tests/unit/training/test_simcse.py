"""Unsupervised SimCSE on a tiny random BERT: the loss against NumPy, dropout as the only
difference between the views, and the training MLP kept out of the saved encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from benchharness.training.authoring import load_base, run_loop
from benchharness.training.methods.simcse.model import SimCSE, info_nce
from tests.helpers import training


def numpy_info_nce(z1: np.ndarray, z2: np.ndarray, t: float) -> float:
    """-log softmax_j(cos(z1_i, z2_j) / t)[i], averaged over i (SimCSE eq. 4, one direction)."""
    a = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
    b = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
    sims = a @ b.T / t
    losses = [-(sims[i, i] - np.log(np.sum(np.exp(sims[i])))) for i in range(len(a))]
    return float(np.mean(losses))


def test_info_nce_matches_numpy():
    rng = np.random.default_rng(3)
    z1, z2 = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    got = info_nce(torch.tensor(z1), torch.tensor(z2), 0.05)
    assert float(got) == pytest.approx(numpy_info_nce(z1, z2, 0.05), rel=1e-5)


def test_views_differ_by_dropout_only(tiny_bert):
    encoder, tokenizer, _ = load_base(str(tiny_bert))
    method = SimCSE(encoder, tokenizer)
    batch = method.collate(["a dog runs in the park .", "prices rose again ."])
    method.train()
    z1, z2 = method.views(batch)
    assert not torch.allclose(z1, z2)  # two dropout masks
    method.eval()
    with torch.no_grad():
        e1, e2 = method.views(batch)
    torch.testing.assert_close(e1, e2)  # without dropout the two copies coincide
    # the views are the MLP of the [CLS] state
    with torch.no_grad():
        cls = encoder(**batch).last_hidden_state[:, 0]
        torch.testing.assert_close(e1, torch.tanh(method.mlp[0](cls)))


def test_saved_encoder_drops_the_mlp_and_evaluates_cls_before_pooler(tiny_bert, tmp_path):
    encoder, tokenizer, source = load_base(str(tiny_bert))
    method = SimCSE(encoder, tokenizer)
    texts = [f"sentence number {i} about topic {i % 5} ." for i in range(24)]
    config = training(
        str(tiny_bert),
        tmp_path / "run",
        batch_size=8,
        max_steps=3,
        eval_every=None,
        eval_at_start=False,
        threads=1,
    )
    run_loop(method, texts, *config, data={"name": "synthetic"}, base_source=source)
    keys = load_file(str(tmp_path / "run" / "model.safetensors")).keys()
    assert not any("mlp" in k for k in keys)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["encoder"]["pooling"] == "cls_before_pooler"
    assert manifest["hyperparameters"]["temperature"] == 0.05
