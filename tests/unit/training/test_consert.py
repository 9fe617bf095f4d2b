"""ConSERT on tiny random BERTs: NT-Xent against a NumPy computation written from the paper's
equation, each augmentation's exact effect on the embedding output, and a short run that lowers
the loss and improves alignment/uniformity (Wang & Isola 2020, computed here)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchharness.training.authoring import load_base, run_loop
from benchharness.training.methods.consert.model import (
    ConSERT,
    ConSERTOptions,
    ViewAugmenter,
    disable_dropout,
    nt_xent,
    nt_xent_directions,
)
from benchharness.training.train_data import NLIPair
from tests.helpers import training

SENTENCES = [
    "a man is playing a guitar on the street .",
    "the cat sleeps on the warm windowsill .",
    "stock markets fell sharply after the announcement .",
    "two children are running through a field of flowers .",
    "the committee approved the new budget yesterday .",
    "a woman is slicing tomatoes in the kitchen .",
    "heavy rain caused flooding in the northern region .",
    "the team won the championship after a long season .",
]


def numpy_nt_xent(z1: np.ndarray, z2: np.ndarray, t: float) -> float:
    """Paper eq. 1, one anchor at a time: -log exp(s(i,p)/t) / sum_{k != i} exp(s(i,k)/t), averaged
    over the 2N anchors."""
    z = np.concatenate([z1, z2]).astype(np.float64)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    n = len(z1)
    losses = []
    for i in range(2 * n):
        partner = i + n if i < n else i - n
        sims = z @ z[i] / t
        denom = sum(np.exp(sims[k]) for k in range(2 * n) if k != i)
        losses.append(-np.log(np.exp(sims[partner]) / denom))
    return float(np.mean(losses))


def test_nt_xent_matches_numpy():
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    expected = numpy_nt_xent(z1, z2, 0.1)
    got = nt_xent(torch.tensor(z1), torch.tensor(z2), 0.1)
    assert float(got) == pytest.approx(expected, rel=1e-5)
    # the reference code's objective is the sum of the two directions' means = 2 x the paper's mean
    a, b = nt_xent_directions(torch.tensor(z1), torch.tensor(z2), 0.1)
    assert float(a + b) == pytest.approx(2 * expected, rel=1e-5)


def test_nt_xent_two_identical_pairs_by_hand():
    # z1 = z2 = two orthogonal unit vectors: each anchor sees its partner at cos 1 and the other
    # two views at cos 0, so the loss is -log(e^(1/t) / (e^(1/t) + 2))
    z = torch.eye(2)
    t = 0.5
    expected = -np.log(np.exp(1 / t) / (np.exp(1 / t) + 2))
    assert float(nt_xent(z, z.clone(), t)) == pytest.approx(expected, rel=1e-6)


@pytest.fixture(scope="module")
def base(tiny_bert):
    encoder, tokenizer, _ = load_base(str(tiny_bert))
    encoder.eval()  # no dropout: compare augmented and plain embedding outputs exactly
    return encoder, tokenizer


def _features(tokenizer, texts):
    return dict(tokenizer(texts, padding=True, return_tensors="pt"))


def test_shuffle_permutes_position_ids_only(base):
    encoder, tokenizer = base
    feats = _features(tokenizer, SENTENCES[:3])
    augmenter = ViewAugmenter(encoder)
    try:
        torch.manual_seed(1)
        with augmenter.view("shuffle", None, feats["attention_mask"]):
            shuffled = encoder.embeddings(input_ids=feats["input_ids"], token_type_ids=feats["token_type_ids"])
        order = augmenter.last["order"]
    finally:
        augmenter.remove()
    lengths = feats["attention_mask"].sum(1).tolist()
    for row, n in enumerate(lengths):
        assert sorted(order[row, :n].tolist()) == list(range(n))  # a permutation of the real tokens
        assert order[row, n:].tolist() == list(range(n, order.shape[1]))  # padding untouched
    assert not torch.equal(order, torch.arange(order.shape[1]).expand_as(order))
    # identical to passing the permuted position ids with the token ids in order
    explicit = encoder.embeddings(
        input_ids=feats["input_ids"], token_type_ids=feats["token_type_ids"], position_ids=order
    )
    torch.testing.assert_close(shuffled, explicit)


def _plain_and_view(encoder, tokenizer, name, rate, texts):
    feats = _features(tokenizer, texts)
    plain = encoder.embeddings(input_ids=feats["input_ids"], token_type_ids=feats["token_type_ids"])
    augmenter = ViewAugmenter(encoder)
    try:
        with augmenter.view(name, rate, feats["attention_mask"]):
            view = encoder.embeddings(input_ids=feats["input_ids"], token_type_ids=feats["token_type_ids"])
    finally:
        augmenter.remove()
    return plain, view, feats["attention_mask"].sum(1).tolist()


def test_token_cutoff_zeroes_whole_rows(base):
    encoder, tokenizer = base
    plain, view, lengths = _plain_and_view(encoder, tokenizer, "token_cutoff", 0.15, SENTENCES[:4])
    for row, n in enumerate(lengths):
        zero_rows = (view[row] == 0).all(dim=-1)
        assert int(zero_rows.sum()) == int(n * 0.15)  # e.g. 12 tokens -> 1 row
        assert not zero_rows[n:].any()  # only real tokens are cut
        torch.testing.assert_close(view[row][~zero_rows], plain[row][~zero_rows])


def test_feature_cutoff_zeroes_columns(base):
    encoder, tokenizer = base
    plain, view, _ = _plain_and_view(encoder, tokenizer, "feature_cutoff", 0.2, SENTENCES[:4])
    hidden = plain.shape[-1]
    for row in range(plain.shape[0]):
        zero_cols = (view[row] == 0).all(dim=0)
        assert int(zero_cols.sum()) == int(hidden * 0.2)  # 32 dims -> 6 columns
        torch.testing.assert_close(view[row][:, ~zero_cols], plain[row][:, ~zero_cols])


def test_dropout_zeroes_elements_without_rescaling(base):
    encoder, tokenizer = base
    plain, view, lengths = _plain_and_view(encoder, tokenizer, "dropout", 0.2, SENTENCES[:4])
    hidden = plain.shape[-1]
    for row, n in enumerate(lengths):
        zeros = view[row, :n] == 0
        assert int(zeros.sum()) == int(n * hidden * 0.2)
        assert not (view[row] == 0).all(dim=-1).any()  # scattered elements, not whole rows
        torch.testing.assert_close(view[row, :n][~zeros], plain[row, :n][~zeros])  # no 1/(1-p) scaling
        torch.testing.assert_close(view[row, n:], plain[row, n:])


def test_disable_dropout_makes_training_forward_deterministic(tiny_bert):
    encoder, tokenizer, _ = load_base(str(tiny_bert))
    encoder.train()
    feats = _features(tokenizer, SENTENCES[:2])
    a, b = encoder(**feats).last_hidden_state, encoder(**feats).last_hidden_state
    assert not torch.allclose(a, b)
    previous = disable_dropout(encoder)
    assert previous and all(p > 0 for p in previous.values())
    torch.testing.assert_close(encoder(**feats).last_hidden_state, encoder(**feats).last_hidden_state)
    assert encoder.config.hidden_dropout_prob > 0  # the saved config keeps its values


def test_joint_objective_adds_weighted_contrastive_terms(tiny_bert):
    encoder, tokenizer, _ = load_base(str(tiny_bert))
    options = ConSERTOptions(
        objective="joint", data="nli.jsonl", view1="none", view2="token_cutoff", rate2=0.1, no_dropout=True
    )
    method = ConSERT(encoder, tokenizer, options)
    pairs = [NLIPair(SENTENCES[i], SENTENCES[i + 1], i % 3) for i in range(6)]
    batch = method.collate(pairs)
    with torch.no_grad():
        torch.manual_seed(0)
        out = method(batch)
        # recompute each term with the same random draws
        torch.manual_seed(0)
        u, v = method.embed(batch["a"]), method.embed(batch["b"])
        logits = method.classifier(torch.cat([u, v, (u - v).abs()], dim=-1))
        ce = F.cross_entropy(logits, batch["labels"])
        con_a, _ = method.contrastive(batch["a"])
        con_b, _ = method.contrastive(batch["b"])
    assert float(out.loss) == pytest.approx(float(ce + 0.15 * (con_a + con_b)), rel=1e-5)
    assert out.logs["ce"] == pytest.approx(float(ce), rel=1e-5)


def alignment(x: np.ndarray, y: np.ndarray) -> float:
    """Wang & Isola: E ||f(x) - f(y)||^2 over positive pairs of unit vectors."""
    return float(np.mean(np.sum((x - y) ** 2, axis=1)))


def uniformity(x: np.ndarray) -> float:
    """Wang & Isola: log E exp(-2 ||f(x) - f(y)||^2) over distinct pairs of unit vectors."""
    d2 = np.sum((x[:, None] - x[None]) ** 2, axis=-1)
    iu = np.triu_indices(len(x), k=1)
    return float(np.log(np.mean(np.exp(-2 * d2[iu]))))


def _views(method: ConSERT, texts: list[str], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm embeddings of the two training views, with fixed random draws."""
    method.eval()
    feats = method.collate(texts)["a"]
    torch.manual_seed(seed)
    with torch.no_grad():
        (v1, r1), (v2, r2) = method.views
        a = F.normalize(method.embed(feats, v1, r1), dim=-1).numpy()
        b = F.normalize(method.embed(feats, v2, r2), dim=-1).numpy()
    return a, b


def test_short_run_lowers_loss_and_improves_alignment_uniformity(tiny_bert, tmp_path):
    encoder, tokenizer, source = load_base(str(tiny_bert))
    options = ConSERTOptions(view1="token_cutoff", view2="shuffle", no_dropout=True, max_length=32)
    method = ConSERT(encoder, tokenizer, options)
    texts = [f"{s[:-2]} number {i} ." for i, s in enumerate(SENTENCES * 4)]
    a0, b0 = _views(method, texts, seed=7)
    config = training(
        str(tiny_bert),
        tmp_path / "run",
        batch_size=16,
        lr=1e-3,
        max_steps=40,
        warmup_ratio=0.0,
        eval_every=None,
        eval_at_start=False,
        log_every=1,
        threads=1,
    )
    run_loop(method, texts, *config, data={"name": "test sentences"}, base_source=source)
    a1, b1 = _views(method, texts, seed=7)
    losses = [
        r["loss"] for r in map(__import__("json").loads, (tmp_path / "run" / "metrics.jsonl").open()) if "loss" in r
    ]
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    # a random BERT maps every sentence near one point (uniformity ~ 0); training spreads them out
    assert uniformity(np.concatenate([a1, b1])) < uniformity(np.concatenate([a0, b0])) - 0.5
    # relative to how far apart different sentences are, the two views of a sentence get closer
    assert alignment(a1, b1) / -uniformity(a1) < alignment(a0, b0) / -uniformity(a0)
