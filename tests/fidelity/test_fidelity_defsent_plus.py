"""DefSent+, one step against the official implementation (ryuliuxiaodong/DefSent-Plus).

Official pieces rewritten by hand: ``GenerateEntryEmbeddings.py`` (per entry, its definitions padded
together, model in eval mode; AC = mean of the last-layer [CLS] states, AMP = mean of the masked
means); ``TrainEncoder.py`` (the frozen entry matrix as the weight of a bias-free ``nn.Linear``;
``cls``: the BERT pooler output, ``mean``: the masked mean through the same pooler; cross-entropy;
model in train mode, so dropout on; legacy ``transformers.AdamW(lr, eps=1e-6)`` without weight
decay, gradient norm clipped at 1.0, linear decay without warmup, one epoch); and progressive
separate training (README, paper section 3.3): round k builds the entry matrix with round k-1's
encoder and trains the *original* checkpoint against it. The protocol's defaults
(``defsent_plus.model.DEFAULTS``) configure the official step; the loop's other optimizer
(``torch-adamw``) is checked against ``torch.optim.AdamW`` by hand too.
"""

from __future__ import annotations

import json

import pytest
import torch

from benchharness.core.settings import Config
from benchharness.training.harness import Trainer
from benchharness.training.methods.defsent_plus import model as defsent_plus
from benchharness.training.methods.defsent_plus.dictionary import Dictionary
from benchharness.training.methods.defsent_plus.entry_space import entry_embeddings
from benchharness.training.methods.defsent_plus.method import METHOD
from benchharness.training.options import resolve
from benchharness.training.plan import Plan
from benchharness.training.settings import TrainSettings
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
    masked_mean,
    max_abs_diff,
    reached,
    reference_params,
    run_project_steps,
    trainable,
)
from tests.helpers import DATA, TOY_DICTIONARY


@pytest.fixture(scope="module")
def toy() -> Dictionary:
    return Dictionary.from_pairs(TOY_DICTIONARY, "toy")


def official_entry_matrix(model, tokenizer, definitions: list[list[str]], kind: str) -> torch.Tensor:
    """GenerateEntryEmbeddings.py: one padded batch per entry, eval mode, AC or AMP."""
    model.eval()
    rows = []
    with torch.no_grad():
        for defs in definitions:
            enc = tokenizer(defs, padding=True, return_tensors="pt")
            last = model(**enc).last_hidden_state
            vecs = last[:, 0] if kind == "ac" else masked_mean(last, enc["attention_mask"])
            rows.append(vecs.mean(dim=0))
    return torch.stack(rows)


@pytest.mark.parametrize("kind", ["ac", "amp"])
def test_entry_vectors(tiny_bert, toy, kind):
    model, tokenizer = load_tiny(tiny_bert)
    got = entry_embeddings(model, tokenizer, toy, kind, max_length=150, batch_size=3)
    expected = official_entry_matrix(model, tokenizer, toy.definitions, kind)
    diff = float((got.double() - expected).abs().max())
    print(f"defsent+ entry vectors {kind}: max |project - official| = {diff:.1e}")
    assert diff < TOL


def official_loss(reference, batch, matrix: torch.Tensor, pooling: str) -> torch.Tensor:
    inputs = batch["inputs"]
    last = reference(**inputs).last_hidden_state
    x = last[:, 0] if pooling == "cls" else masked_mean(last, inputs["attention_mask"])
    h = torch.tanh(x @ reference.pooler.dense.weight.T + reference.pooler.dense.bias)  # BertPooler
    return cross_entropy(h @ matrix.double().T, batch["labels"])  # bias-free head, weight = entry matrix


def setup(folder, toy, pooling: str):
    encoder, tokenizer = load_tiny(folder)
    matrix = official_entry_matrix(encoder, tokenizer, toy.definitions, "amp").float()
    method = defsent_plus.DefSentPlus(encoder, tokenizer, matrix, pooling, max_length=150)
    reference, _ = load_tiny(folder)
    return method, reference, matrix


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_frozen_bias_free_head_loss_and_gradients(tiny_bert, toy, pooling):
    method, reference, matrix = setup(tiny_bert, toy, pooling)
    texts, labels = toy.pairs()
    batch = method.collate(list(zip(texts, labels)))
    params = reference_params(method, reference)
    method.train(), reference.train()
    torch.manual_seed(9)
    loss = method(batch).loss
    loss.backward()
    torch.manual_seed(9)
    expected = official_loss(reference, batch, matrix, pooling)
    expected.backward()

    loss_diff = abs(float(loss.detach()) - float(expected.detach()))
    diff, where = max_abs_diff(grads(trainable(method)), grads(params))
    print(f"defsent+ {pooling}: |loss - official| = {loss_diff:.1e}, max |grad - official| = {diff:.1e} ({where})")
    assert loss_diff < TOL
    assert diff < TOL, f"gradient of {where} differs by {diff:.2e}"
    # the head: frozen (no parameter, no gradient), bias-free, the entry matrix unchanged
    assert not any(p is method.entry_matrix for p in method.parameters()) and method.entry_matrix.grad is None
    assert set(trainable(method)) == {f"encoder.{n}" for n, _ in reference.named_parameters()}
    assert torch.equal(method.entry_matrix, matrix)


#: the official step (TrainEncoder.py: ``transformers.AdamW(lr, eps=1e-6)``, clip 1.0) as the project's settings
OFFICIAL_SETTINGS = {
    "optimizer": "adamw-legacy",
    "correct_bias": True,
    "adam_eps": 1e-6,
    "weight_decay": 0.0,
    "grad_clip": 1.0,
}


def hand_steps(reference, params, observed, matrix, lr: float, form: str) -> None:
    """The official steps by hand (clip 1.0, eps 1e-6, no weight decay, no warmup) on the batches
    and RNG states (dropout) the project's loop used, with the update ``form``."""
    adam = AdamW(form, eps=1e-6)
    for step, seen in enumerate(observed):
        for p in params.values():
            p.grad = None
        torch.set_rng_state(seen.rng)
        official_loss(reference, seen.batch, matrix, "cls").backward()
        gradients = reached(params)
        clip_(gradients, 1.0)
        adam.step(params, gradients, linear_lr(lr, step, 0, len(observed)))


@pytest.mark.parametrize("configured", ["defaults", "torch-adamw"])
def test_defsent_plus_optimizer_steps(tiny_bert, toy, tmp_path, configured):
    """Two steps (clip 1.0, eps 1e-6, no warmup, no weight decay) of the project's loop and by hand;
    lr 1e-3 (not 5e-5) so that a different optimizer shows above 1e-5.

    ``defaults``: the step the protocol's defaults configure, against the official legacy
    ``transformers.AdamW``; ``torch-adamw``: the loop's torch optimizer, against torch's update.
    Each also runs the other update by hand, which must land apart."""
    method, reference, matrix = setup(tiny_bert, toy, "cls")
    other, _ = load_tiny(tiny_bert)
    params, other_params = reference_params(method, reference), reference_params(method, other)
    reference.train(), other.train()
    texts, labels = toy.pairs()
    lr = 1e-3
    if configured == "defaults":
        settings = configured_step({"DEFAULTS": defsent_plus.DEFAULTS})
        assert settings == OFFICIAL_SETTINGS
        expected, alternative = "legacy", "torch"
    else:
        settings = {**OFFICIAL_SETTINGS, "optimizer": "torch-adamw"}
        expected, alternative = "torch", "legacy"
    observed = run_project_steps(
        method,
        list(zip(texts, labels)),
        tiny_bert,
        tmp_path / "run",
        2,
        lr=lr,
        warmup_ratio=0.0,
        max_length=150,
        **settings,
    )
    hand_steps(reference, params, observed, matrix, lr, expected)
    hand_steps(other, other_params, observed, matrix, lr, alternative)
    project = detached(trainable(method))
    diff, where = max_abs_diff(project, detached(params))
    apart, _ = max_abs_diff(project, detached(other_params))
    print(
        f"defsent+ {configured}: max |param - hand| after 2 steps = {diff:.1e} ({where}); "
        f"the other update ({alternative}) is {apart:.1e} away"
    )
    assert diff < TOL, f"{where} differs by {diff:.2e} after two steps"
    assert apart > APART, "the comparison cannot tell the two updates apart"


def test_pst_round_two_trains_the_original_weights_against_round_one_entries(tiny_bert, toy, tmp_path):
    """Two rounds, the second with lr 0 and one batch per round (dropout off, so the logged loss
    does not depend on the order): round 2's encoder is the original checkpoint unchanged, and its
    first loss is the cross-entropy of the original encoder against the AMP entries of round 1's
    encoder, not of round 1's encoder against them."""
    base = tmp_path / "base"
    model, tokenizer = load_tiny(tiny_bert, dtype=torch.float32, dropout=0.0)
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    dictionary = tmp_path / "toy.tsv"
    dictionary.write_text("".join(f"{e}\t{d}\n" for e, d in TOY_DICTIONARY))
    out = tmp_path / "runs" / "toy"
    # the method's own defaults (no recipe): its declaration, resolved and trained as any caller does
    options, _ = resolve(
        "defsent-plus",
        METHOD.options,
        METHOD.presets,
        None,
        {"dictionary": str(dictionary), "rounds": 2, "batch_size": 32, "round_lrs": "1e-2,0", "no_final_space": True},
        METHOD.adjust,
    )
    trainer = Trainer(METHOD, options, TrainSettings(config=Config(), data_dir=DATA), Plan(base=str(base), out=out))
    runs = trainer.run(trainer.examples())
    assert [run.completed for run in runs] == [True, True]
    r1, r2 = out.with_name("toy-r1"), out.with_name("toy-r2")
    original, _ = load_tiny(base)
    round1, _ = load_tiny(r1)
    round2, _ = load_tiny(r2)

    def first_loss(run) -> float:
        return next(
            json.loads(line)["loss"]
            for line in (run / "metrics.jsonl").read_text().splitlines()
            if "loss" in json.loads(line)
        )

    def hand_loss(encoder, entries) -> float:
        texts, labels = toy.pairs()
        batch = {"inputs": dict(tokenizer(texts, padding=True, return_tensors="pt")), "labels": torch.tensor(labels)}
        with torch.no_grad():
            return float(official_loss(encoder.eval(), batch, entries, "cls"))

    start, state1, state2 = original.state_dict(), round1.state_dict(), round2.state_dict()
    assert max(float((p - state1[n]).abs().max()) for n, p in start.items()) > 1e-3  # round 1 trained
    assert all(torch.equal(p, state2[n]) for n, p in start.items())  # round 2 = the original, lr 0
    entries1 = official_entry_matrix(original, tokenizer, toy.definitions, "amp")
    entries2 = official_entry_matrix(round1, tokenizer, toy.definitions, "amp")
    assert abs(first_loss(r1) - hand_loss(original, entries1)) < TOL
    assert abs(first_loss(r2) - hand_loss(original, entries2)) < TOL
    assert abs(first_loss(r2) - hand_loss(round1, entries2)) > 1e-3  # not round 1's encoder continued
