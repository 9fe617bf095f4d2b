"""SimCSE, one step against the official implementation (princeton-nlp/SimCSE, simcse/models.py).

The official unsupervised forward: each sentence twice in one encoder pass (dropout makes the two
views), [CLS] of the last layer through the training MLP (dense + tanh; ``--pooler_type cls
--mlp_only_train``), ``cos(z1_i, z2_j) / 0.05`` and cross-entropy with labels ``arange(N)``. The
official batch interleaves the copies (``(bs, 2, len)`` viewed as ``(2 bs, len)``); the project
concatenates ``[s; s]``. Both are one pass over i.i.d. dropout masks, so the layout is not a
difference of method; to reuse the very same dropout draws, the dropout comparison encodes in the
project's layout, and the dropout-free comparison uses the official one.

The official optimizer step is the HF Trainer's (transformers 4.2.1): legacy ``transformers.AdamW``
(eps 1e-8, no weight decay), gradient norm clipped at ``max_grad_norm`` = 1.0, linear decay without
warmup. Every SimCSE preset configures that step; the loop's other optimizer (``torch-adamw``) is
checked against ``torch.optim.AdamW`` by hand too.
"""

from __future__ import annotations

import pytest
import torch

from benchharness.training.methods.simcse.model import PRESETS, SimCSE, SimCSEOptions
from tests.fidelity.shared_steps import (
    APART,
    TOL,
    AdamW,
    clip_,
    configured_step,
    cross_entropy,
    detached,
    grads,
    linear_lr,
    load_tiny,
    max_abs_diff,
    reached,
    reference_params,
    run_project_steps,
    trainable,
)

SENTENCES = [
    "a man is playing a guitar .",
    "the cat sat on the warm mat",
    "stocks fell sharply on monday",
    "two kids ride bikes down a hill",
    "rain is expected tomorrow",
]
TEMPERATURE = 0.05


def official_loss(
    encoder, params: dict[str, torch.Tensor], batch: dict[str, torch.Tensor], layout: str
) -> torch.Tensor:
    """The official unsupervised loss, by hand, on ``params`` (MLP weights named as the project's)."""
    n = batch["input_ids"].shape[0]
    if layout == "official":  # (bs, 2, len) -> (2 bs, len): copies of sentence i at rows 2i, 2i+1
        rows = {k: v.repeat_interleave(2, dim=0) for k, v in batch.items()}
    else:
        rows = {k: torch.cat([v, v]) for k, v in batch.items()}
    cls = encoder(**rows).last_hidden_state[:, 0]
    z = torch.tanh(cls @ params["mlp.0.weight"].T + params["mlp.0.bias"])
    z1, z2 = (z[0::2], z[1::2]) if layout == "official" else (z[:n], z[n:])
    z1 = z1 / z1.norm(dim=-1, keepdim=True)
    z2 = z2 / z2.norm(dim=-1, keepdim=True)
    return cross_entropy(z1 @ z2.T / TEMPERATURE, torch.arange(n))


def setup(folder, dropout: float | None):
    encoder, tokenizer = load_tiny(folder, dropout=dropout)
    torch.manual_seed(1)
    method = SimCSE(encoder, tokenizer, SimCSEOptions(temperature=TEMPERATURE, max_length=32)).double()
    reference, _ = load_tiny(folder, dropout=dropout)
    return method, reference, tokenizer


@pytest.mark.parametrize("dropout", [True, False], ids=["dropout-same-draws", "no-dropout-official-layout"])
def test_simcse_loss_and_gradients(tiny_bert, dropout):
    method, reference, tokenizer = setup(tiny_bert, None if dropout else 0.0)
    batch = dict(tokenizer(SENTENCES, padding=True, truncation=True, max_length=32, return_tensors="pt"))
    project_batch = method.collate(SENTENCES)
    assert project_batch.keys() == batch.keys() and all(torch.equal(project_batch[k], batch[k]) for k in batch)
    params = reference_params(method, reference)
    method.train(), reference.train()

    torch.manual_seed(7)
    loss = method(batch).loss
    loss.backward()
    torch.manual_seed(7)
    expected = official_loss(reference, params, batch, "project" if dropout else "official")
    expected.backward()

    loss_diff = abs(float(loss.detach()) - float(expected.detach()))
    diff, where = max_abs_diff(grads(trainable(method)), grads(params))
    print(f"simcse: |loss - official| = {loss_diff:.1e}, max |grad - official| = {diff:.1e} ({where})")
    assert loss_diff < TOL
    assert diff < TOL, f"gradient of {where} differs by {diff:.2e}"
    assert float(expected.detach()) > 0.01  # the views differ (dropout) or the negatives matter: not a trivial loss


def hand_steps(reference, params, observed, lr, form: str, clip: float | None) -> None:
    """The optimizer steps by hand on the batches and RNG states the project's loop used."""
    adam = AdamW(form, eps=1e-8)
    for step, seen in enumerate(observed):
        for p in params.values():
            p.grad = None
        torch.set_rng_state(seen.rng)
        official_loss(reference, params, seen.batch, "project").backward()
        gradients = reached(params)
        if clip is not None:
            clip_(gradients, clip)
        adam.step(params, gradients, linear_lr(lr, step, 0, len(observed)))


#: the official step (HF Trainer defaults of transformers 4.2.1) written as the project's settings
OFFICIAL_SETTINGS = {
    "optimizer": "adamw-legacy",
    "correct_bias": True,
    "adam_eps": 1e-8,
    "weight_decay": 0.0,
    "grad_clip": 1.0,
}


@pytest.mark.parametrize("configured", ["presets", "torch-adamw-no-clip"])
def test_simcse_optimizer_steps(tiny_bert, tmp_path, configured):
    """Two steps of the project's loop against two steps by hand (lr 1e-3 so that a different
    optimizer shows above 1e-5; the paper's 3e-5 would hide it in a tiny model).

    ``presets``: the step every SimCSE preset configures, against the official step (legacy AdamW,
    eps 1e-8, clip 1.0); ``torch-adamw-no-clip``: the loop's torch optimizer without clipping,
    against torch's update. Each also runs the other update by hand, which must land apart."""
    method, reference, _ = setup(tiny_bert, None)
    other, _ = load_tiny(tiny_bert)
    params, other_params = reference_params(method, reference), reference_params(method, other)
    reference.train(), other.train()
    lr = 1e-3
    if configured == "presets":
        settings = configured_step(PRESETS)
        assert settings == OFFICIAL_SETTINGS
        expected, alternative = ("legacy", 1.0), ("torch", None)
    else:
        settings = {"optimizer": "torch-adamw", "grad_clip": None}
        expected, alternative = ("torch", None), ("legacy", 1.0)
    observed = run_project_steps(
        method, SENTENCES, tiny_bert, tmp_path / "run", 2, lr=lr, warmup_ratio=0.0, max_length=32, **settings
    )
    hand_steps(reference, params, observed, lr, *expected)
    hand_steps(other, other_params, observed, lr, *alternative)
    project = detached(trainable(method))
    diff, where = max_abs_diff(project, detached(params))
    apart, _ = max_abs_diff(project, detached(other_params))
    print(
        f"simcse {configured}: max |param - hand| after 2 steps = {diff:.1e} ({where}); "
        f"the other update ({alternative[0]}, clip {alternative[1]}) is {apart:.1e} away"
    )
    assert diff < TOL, f"{where} differs by {diff:.2e} after two steps"
    assert apart > APART, "the comparison cannot tell the two updates apart"
