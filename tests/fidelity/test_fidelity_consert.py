"""ConSERT, one step against the official implementation (yym6472/ConSERT).

Official pieces rewritten here by hand: the augmentations of the patched ``BertModel``
(transformers/modeling_bert.py: ``_replace_position_ids`` permutes the position ids of the first
``n`` = attended tokens; ``_cutoff_embeddings`` zeroes, in the embedding output, ``int(n * rate)``
token rows ("row"), ``int(hidden * rate)`` feature columns over the whole sequence ("column") or
``int(n * hidden * rate)`` elements of the flattened first ``n`` rows ("random" = dropout), with
``index_fill``); mean pooling over the attention mask; ``AdvCLSoftmaxLoss._contrastive_loss_forward``
(normalised views, logits / 0.1, same-view self-similarities minus 1e9, cross-entropy of
``[ab, aa]`` and of ``[ba, bb]``, summed) times ``cl_rate`` 0.15, the only loss of the
``--no_pair --cl_loss_only`` unsupervised run, with ``--no_dropout``.

The official code draws its indices with Python's ``random.shuffle``, the project with
``torch.randperm``; the hand computation takes the project's draws (recorded at each forward) and
checks that they have the official form before applying them the official way.

The official optimizer step (sentence_transformers ``fit`` as called by main.py): legacy
``transformers.AdamW(lr, eps=1e-6, correct_bias=False)``, weight decay 0.01 except biases and
LayerNorm, gradient norm clipped at 1.0, linear schedule with ``ceil(10%)`` warmup steps. Every
ConSERT preset configures that step; the loop's other optimizer (``torch-adamw``) is checked
against ``torch.optim.AdamW`` by hand too.
"""

from __future__ import annotations

import pytest
import torch

from benchharness.training.methods.consert.model import (
    AUGMENTATIONS,
    PAPER_RATES,
    PRESETS,
    ConSERT,
    ConSERTOptions,
    nt_xent,
)
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

SENTENCES = [
    "a man is playing a guitar on stage .",
    "the cat sat on the mat",
    "stocks fell sharply on monday",
    "two kids ride their bikes down a steep hill",
    "rain is expected",
]
TEMPERATURE, CL_RATE = 0.1, 0.15
CUTOFF_DIRECTION = {"token_cutoff": "row", "feature_cutoff": "column", "dropout": "random"}


def official_indices(name: str, keep: torch.Tensor, n: int, rate: float) -> list[int]:
    """The official index list behind one sentence's cutoff mask, after checking the mask has the
    official form: exactly int(count * rate) whole rows / whole columns / elements of the first n
    rows zeroed, nothing else."""
    seq_len, hidden = keep.shape
    if name == "token_cutoff":
        rows = [r for r in range(seq_len) if not keep[r].any()]
        assert len(rows) == int(n * rate) and all(r < n for r in rows)
        assert int((~keep).sum()) == len(rows) * hidden
        return rows
    if name == "feature_cutoff":
        cols = [c for c in range(hidden) if not keep[:, c].any()]
        assert len(cols) == int(hidden * rate) and int((~keep).sum()) == len(cols) * seq_len
        return cols
    flat = (~keep.reshape(-1)).nonzero().squeeze(1).tolist()
    assert len(flat) == int(n * hidden * rate) and all(i < n * hidden for i in flat)
    return flat


def official_view(
    encoder, features: dict[str, torch.Tensor], name: str, rate: float | None, draw: dict[str, torch.Tensor]
) -> torch.Tensor:
    """One view by the official recipe, mean-pooled."""
    mask = features["attention_mask"]
    lengths = mask.sum(1).tolist()
    kwargs = dict(features)
    if name == "shuffle":
        order = draw["order"]
        for row, n in enumerate(lengths):  # a permutation of the first n positions, the rest untouched
            assert sorted(order[row, :n].tolist()) == list(range(n))
            assert order[row, n:].tolist() == list(range(n, order.shape[1]))
        kwargs["position_ids"] = order
    handle = None
    if name in CUTOFF_DIRECTION:
        indices = [official_indices(name, draw["keep"][row], n, rate) for row, n in enumerate(lengths)]

        def cutoff(module, inputs, output):
            rows = []
            for row, idx in enumerate(indices):
                sample, index = output[row], torch.tensor(idx, dtype=torch.long)
                if name == "token_cutoff":
                    rows.append(sample.index_fill(0, index, 0.0))
                elif name == "feature_cutoff":
                    rows.append(sample.index_fill(1, index, 0.0))
                else:
                    rows.append(sample.reshape(-1).index_fill(0, index, 0.0).reshape(sample.shape))
            return torch.stack(rows)

        handle = encoder.embeddings.register_forward_hook(cutoff)
    try:
        hidden = encoder(**kwargs).last_hidden_state
    finally:
        if handle is not None:
            handle.remove()
    return masked_mean(hidden, mask)


def official_contrastive(h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
    """``_contrastive_loss_forward`` (nt_xent, hidden_norm): loss_a + loss_b."""
    h1 = h1 / h1.norm(dim=-1, keepdim=True)
    h2 = h2 / h2.norm(dim=-1, keepdim=True)
    n = h1.shape[0]
    masks = torch.eye(n, dtype=h1.dtype)
    aa = h1 @ h1.T / TEMPERATURE - masks * 1e9
    bb = h2 @ h2.T / TEMPERATURE - masks * 1e9
    ab, ba = h1 @ h2.T / TEMPERATURE, h2 @ h1.T / TEMPERATURE
    labels = torch.arange(n)
    return cross_entropy(torch.cat([ab, aa], 1), labels) + cross_entropy(torch.cat([ba, bb], 1), labels)


def record_draws(method: ConSERT) -> list[dict[str, torch.Tensor]]:
    """Every forward's augmentation draw (empty for a plain view), in order."""
    draws: list[dict[str, torch.Tensor]] = []

    def clear(module, inputs):
        method.augmenter.last = {}

    method.encoder.embeddings.register_forward_pre_hook(clear)
    method.encoder.embeddings.register_forward_hook(lambda m, i, o: draws.append(dict(method.augmenter.last)))
    return draws


def official_loss(reference, features, views, draws) -> torch.Tensor:
    (v1, r1), (v2, r2) = views
    h1 = official_view(reference, features, v1, r1, draws[0])
    h2 = official_view(reference, features, v2, r2, draws[1])
    return CL_RATE * official_contrastive(h1, h2)


def setup(folder, view1: str, view2: str, rate1=None, rate2=None):
    encoder, tokenizer = load_tiny(folder)
    options = ConSERTOptions(
        view1=view1,
        rate1=rate1,
        view2=view2,
        rate2=rate2,
        temperature=TEMPERATURE,
        cl_rate=CL_RATE,
        max_length=64,
        no_dropout=True,
    )
    method = ConSERT(encoder, tokenizer, options).double()
    reference, _ = load_tiny(folder, dropout=0.0)
    return method, reference, tokenizer


@pytest.mark.parametrize(
    "pair", [(a, "none") for a in AUGMENTATIONS] + [("feature_cutoff", "shuffle")], ids=lambda p: f"{p[0]}-vs-{p[1]}"
)
def test_consert_views_loss_and_gradients(tiny_bert, pair):
    method, reference, tokenizer = setup(tiny_bert, *pair)
    draws = record_draws(method)
    features = dict(tokenizer(SENTENCES, padding=True, truncation=True, max_length=64, return_tensors="pt"))
    batch = method.collate(SENTENCES)
    assert all(torch.equal(batch["a"][k], features[k]) for k in features)
    params = reference_params(method, reference)
    method.train(), reference.train()

    torch.manual_seed(3)
    loss = method(batch).loss
    loss.backward()
    assert len(draws) == 2
    expected = official_loss(reference, features, [(v, PAPER_RATES.get(v)) for v in pair], draws)
    expected.backward()

    loss_diff = abs(float(loss.detach()) - float(expected.detach()))
    diff, where = max_abs_diff(grads(trainable(method)), grads(params))
    print(f"consert {pair}: |loss - official| = {loss_diff:.1e}, max |grad - official| = {diff:.1e} ({where})")
    assert loss_diff < TOL
    assert diff < TOL, f"gradient of {where} differs by {diff:.2e}"
    if pair[0] != "none":  # the augmentation changed the view
        with torch.no_grad():
            plain = masked_mean(reference(**features).last_hidden_state, features["attention_mask"])
            assert not torch.allclose(
                official_view(reference, features, pair[0], PAPER_RATES.get(pair[0]), draws[0]), plain
            )


def test_nt_xent_is_the_mean_over_the_2n_anchors():
    """The paper's NT-Xent: each of the 2N views against its partner among the 2N - 1 others."""
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(6, 8, generator=g, dtype=torch.float64), torch.randn(6, 8, generator=g, dtype=torch.float64)
    z = torch.cat([z1, z2])
    z = z / z.norm(dim=-1, keepdim=True)
    sim = z @ z.T / TEMPERATURE
    losses = []
    for i in range(12):
        partner = (i + 6) % 12
        others = [j for j in range(12) if j != i]
        losses.append(torch.logsumexp(sim[i, others], 0) - sim[i, partner])
    assert abs(float(nt_xent(z1, z2, TEMPERATURE)) - float(torch.stack(losses).mean())) < TOL
    assert abs(float(nt_xent(z1, z2, TEMPERATURE)) - float(official_contrastive(z1, z2)) / 2) < TOL


def no_decay(name: str) -> bool:
    """sentence_transformers' fit: no weight decay for names containing bias / LayerNorm.weight."""
    return any(nd in name for nd in ("bias", "LayerNorm.bias", "LayerNorm.weight"))


#: the official step (sentence_transformers 0.3.9 ``fit`` with main.py's optimizer_params) as the
#: project's settings
OFFICIAL_SETTINGS = {
    "optimizer": "adamw-legacy",
    "correct_bias": False,
    "adam_eps": 1e-6,
    "weight_decay": 0.01,
    "grad_clip": 1.0,
}


def hand_steps(reference, params, observed, draws, lr: float, adam: AdamW, clip: float | None) -> None:
    """The optimizer steps by hand on the batches and augmentation draws the project's loop used
    (10% warmup of 2 steps = 1 step at lr 0)."""
    for step, seen in enumerate(observed):
        for p in params.values():
            p.grad = None
        official_loss(
            reference, seen.batch["a"], [("feature_cutoff", 0.2), ("shuffle", None)], draws[2 * step : 2 * step + 2]
        ).backward()
        gradients = reached(params)
        if clip is not None:
            clip_(gradients, clip)
        adam.step(params, gradients, linear_lr(lr, step, 1, 2))


@pytest.mark.parametrize("configured", ["presets", "torch-adamw-no-clip"])
def test_consert_optimizer_steps(tiny_bert, tmp_path, configured):
    """Two steps of the unsup-base recipe (feature cutoff 0.2 vs shuffle, 10% warmup = 1 step of
    lr 0, weight decay 0.01, eps 1e-6) in the project's loop and by hand (lr 1e-3, not 5e-7, so
    that a different optimizer shows above 1e-5).

    ``presets``: the step every ConSERT preset configures, against the official one
    (``transformers.AdamW(correct_bias=False)``, clip 1.0); ``torch-adamw-no-clip``: the loop's
    torch optimizer without clipping, against torch's update. Each also runs the other update by
    hand, which must land apart."""
    method, reference, _ = setup(tiny_bert, "feature_cutoff", "shuffle", rate1=0.2)
    other, _ = load_tiny(tiny_bert, dropout=0.0)
    draws = record_draws(method)
    params, other_params = reference_params(method, reference), reference_params(method, other)
    reference.train(), other.train()
    lr = 1e-3
    official = (AdamW("legacy", eps=1e-6, correct_bias=False, weight_decay=0.01, no_decay=no_decay), 1.0)
    torch_step = (AdamW("torch", eps=1e-6, weight_decay=0.01, no_decay=no_decay), None)
    if configured == "presets":
        settings = configured_step(PRESETS)
        assert settings == OFFICIAL_SETTINGS
        expected, alternative = official, torch_step
    else:
        settings = {
            "optimizer": "torch-adamw",
            "correct_bias": True,
            "adam_eps": 1e-6,
            "weight_decay": 0.01,
            "grad_clip": None,
        }
        expected, alternative = torch_step, official
    observed = run_project_steps(
        method, SENTENCES, tiny_bert, tmp_path / "run", 2, lr=lr, warmup_ratio=0.1, max_length=64, **settings
    )
    hand_steps(reference, params, observed, draws, lr, *expected)
    hand_steps(other, other_params, observed, draws, lr, *alternative)
    project = detached(trainable(method))
    diff, where = max_abs_diff(project, detached(params))
    apart, _ = max_abs_diff(project, detached(other_params))
    print(
        f"consert {configured}: max |param - hand| after 2 steps = {diff:.1e} ({where}); "
        f"the other update ({alternative[0].form}, correct_bias {alternative[0].correct_bias}, clip "
        f"{alternative[1]}) is {apart:.1e} away"
    )
    assert diff < TOL, f"{where} differs by {diff:.2e} after two steps"
    assert apart > APART, "the comparison cannot tell the two updates apart"
