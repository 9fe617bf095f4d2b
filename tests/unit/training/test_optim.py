"""The legacy ``transformers.AdamW`` (``training/optim.py``) against the update computed by
hand in numpy, its state round trip, and how the options choose it."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from benchharness.training.authoring import make_optimizer
from benchharness.training.optim import LegacyAdamW
from benchharness.training.options import TrainingOptions

B1, B2 = 0.9, 0.999
# three steps' gradients of a 2x3 weight and a 3-vector bias, and the scheduled lr of each step
GRADS_W = [
    np.array([[0.5, -1.0, 2e-3], [0.0, 3.0, -0.25]]),
    np.array([[-0.1, 0.4, 1e-3], [1e-4, -2.0, 0.5]]),
    np.array([[0.3, 0.3, -5e-3], [0.2, 1.0, 0.0]]),
]
GRADS_B = [np.array([1.0, -0.5, 1e-5]), np.array([0.2, 0.2, -1e-5]), np.array([-0.7, 0.1, 0.0])]
LRS = [1e-2, 5e-3, 2.5e-3]
W0 = np.array([[0.1, -0.2, 0.3], [1.5, 0.0, -0.7]])
B0 = np.array([0.05, -0.05, 0.5])


def numpy_legacy(
    p0: np.ndarray, grads: list[np.ndarray], lrs: list[float], eps: float, weight_decay: float, correct_bias: bool
) -> np.ndarray:
    """transformers.AdamW by hand: eps added to sqrt(v), the bias correction folded into the step
    size (or left out), then decoupled weight decay of the updated parameter."""
    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, (g, lr) in enumerate(zip(grads, lrs), start=1):
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g**2
        size = lr * math.sqrt(1 - B2**t) / (1 - B1**t) if correct_bias else lr
        p = p - size * m / (np.sqrt(v) + eps)
        p = p - lr * weight_decay * p
    return p


def numpy_torch_adamw(p0, grads, lrs, eps, weight_decay):
    """torch.optim.AdamW by hand (decay first, eps added after the bias correction)."""
    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, (g, lr) in enumerate(zip(grads, lrs), start=1):
        p = p * (1 - lr * weight_decay)
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g**2
        p = p - lr / (1 - B1**t) * m / (np.sqrt(v / (1 - B2**t)) + eps)
    return p


def run(optimizer_cls, steps: int = 3, **kwargs):
    w = torch.nn.Parameter(torch.tensor(W0))
    b = torch.nn.Parameter(torch.tensor(B0))
    opt = optimizer_cls([{"params": [w], "weight_decay": 0.01}, {"params": [b], "weight_decay": 0.0}], **kwargs)
    for t in range(steps):
        for group in opt.param_groups:
            group["lr"] = LRS[t]
        w.grad, b.grad = torch.tensor(GRADS_W[t]), torch.tensor(GRADS_B[t])
        opt.step()
    return w, b, opt


@pytest.mark.parametrize("correct_bias", [True, False])
@pytest.mark.parametrize("eps", [1e-6, 1e-8])
def test_legacy_adamw_three_steps_by_hand(correct_bias, eps):
    w, b, _ = run(LegacyAdamW, eps=eps, correct_bias=correct_bias)
    want_w = numpy_legacy(W0, GRADS_W, LRS, eps, 0.01, correct_bias)
    want_b = numpy_legacy(B0, GRADS_B, LRS, eps, 0.0, correct_bias)
    np.testing.assert_allclose(w.detach().numpy(), want_w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.detach().numpy(), want_b, rtol=0, atol=1e-12)
    # the hand computation is not torch's update: on these numbers (the bias's 1e-5 gradients, where
    # eps matters) the two differ well above 1e-5
    other_w, other_b = numpy_torch_adamw(W0, GRADS_W, LRS, eps, 0.01), numpy_torch_adamw(B0, GRADS_B, LRS, eps, 0.0)
    assert max(np.abs(other_w - want_w).max(), np.abs(other_b - want_b).max()) > 1e-4


def test_legacy_adamw_first_step_in_closed_form():
    """Step 1 with bias correction moves p by lr * g / (|g| + eps / sqrt(1 - b2)), about lr;
    without it, by (1 - b1) / sqrt(1 - b2) ~ 3.16 times that."""
    g, lr, eps = 0.5, 0.1, 1e-6
    for correct, factor in ((True, 1.0), (False, (1 - B1) / math.sqrt(1 - B2))):
        p = torch.nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
        opt = LegacyAdamW([p], lr=lr, eps=eps, correct_bias=correct)
        p.grad = torch.tensor([g], dtype=torch.float64)
        opt.step()
        m, v = (1 - B1) * g, (1 - B2) * g * g
        size = lr * math.sqrt(1 - B2) / (1 - B1) if correct else lr
        assert float(p.detach()) == pytest.approx(1.0 - size * m / (math.sqrt(v) + eps), abs=1e-15)
        assert 1.0 - float(p.detach()) == pytest.approx(lr * factor, rel=1e-4)


def test_legacy_adamw_state_round_trip():
    """Two steps, state_dict through torch.save/torch.load (as a checkpoint) into a fresh optimizer
    on copies of the parameters, a third step on both: identical; the copy has the state it was
    given (step counts, moments, the groups' settings)."""
    w, b, opt = run(LegacyAdamW, steps=2, eps=1e-6, correct_bias=False)
    w2, b2 = (torch.nn.Parameter(x.detach().clone()) for x in (w, b))
    fresh = LegacyAdamW(
        [{"params": [w2], "weight_decay": 0.01}, {"params": [b2], "weight_decay": 0.0}],
        lr=1.0,
        eps=1.0,
        correct_bias=True,
    )  # groups' settings come back from the state dict
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer, weights_only=False))
    assert fresh.param_groups[0]["eps"] == 1e-6 and fresh.param_groups[0]["correct_bias"] is False
    assert fresh.state[w2]["step"] == 2
    torch.testing.assert_close(fresh.state[w2]["exp_avg_sq"], opt.state[w]["exp_avg_sq"], rtol=0, atol=0)
    for o, (pw, pb) in ((opt, (w, b)), (fresh, (w2, b2))):
        for group in o.param_groups:
            group["lr"] = LRS[2]
        pw.grad, pb.grad = torch.tensor(GRADS_W[2]), torch.tensor(GRADS_B[2])
        o.step()
    assert torch.equal(w, w2) and torch.equal(b, b2)
    np.testing.assert_allclose(w2.detach().numpy(), numpy_legacy(W0, GRADS_W, LRS, 1e-6, 0.01, False), atol=1e-12)


def test_legacy_adamw_skips_parameters_without_gradient_and_refuses_bad_settings():
    p, q = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    opt = LegacyAdamW([p, q], lr=0.1, weight_decay=0.5)
    p.grad = torch.ones(2)
    opt.step()
    assert torch.equal(q, torch.ones(2)) and q not in opt.state  # no update, no weight decay, no state
    assert not torch.equal(p, torch.ones(2))
    for kwargs, words in (
        ({"lr": -1.0}, "learning rate"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"eps": -1e-8}, "eps"),
        ({"weight_decay": -0.1}, "weight_decay"),
    ):
        with pytest.raises(ValueError, match=words):
            LegacyAdamW([p], **kwargs)


def test_config_chooses_the_optimizer(tmp_path):
    module = torch.nn.Sequential(torch.nn.Linear(3, 2))
    legacy = make_optimizer(
        module,
        TrainingOptions(
            optimizer="adamw-legacy",
            correct_bias=False,
            adam_eps=1e-6,
            lr=2e-5,
            weight_decay=0.01,
        ),
    )
    assert isinstance(legacy, LegacyAdamW)
    decayed, plain = legacy.param_groups
    assert (decayed["weight_decay"], plain["weight_decay"]) == (0.01, 0.0)
    assert all(g["correct_bias"] is False and g["eps"] == 1e-6 and g["lr"] == 2e-5 for g in legacy.param_groups)
    default = make_optimizer(module, TrainingOptions())
    assert type(default) is torch.optim.AdamW


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"optimizer": "sgd"}, "unknown optimizer 'sgd'"),
        ({"optimizer": "torch-adamw", "correct_bias": False}, "correct_bias=False needs optimizer adamw-legacy"),
        ({"correct_bias": "no"}, "correct_bias must be true or false, got 'no'"),
        ({"adam_eps": 0.0}, "adam_eps must be a positive number"),
    ],
)
def test_config_refuses_optimizer_settings(tmp_path, kwargs, words):
    with pytest.raises(ValueError, match=words):
        TrainingOptions(**kwargs)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_chunked_row_wise_update_gives_bit_for_bit_the_update_written_with_whole_tensors(weight_decay):
    """The CPU step updates in cache-sized chunks and skips the rows of a tall matrix whose gradient
    and moments are all zero (word embeddings). Over six steps of a vocabulary-like matrix whose
    gradient touches a few rows per step (-0.0 entries included), a tensor longer than one chunk
    with a ragged tail, a bias that skips a step, and a state-dict round trip half-way (a resumed
    run rebuilds its active rows from the moments), the parameters and moments equal exactly the
    formula computed out of place on whole tensors with torch's own kernels."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(6000, 48), (300_001,), (48,)]
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    expected = [p.detach().clone() for p in params]
    m = [torch.zeros_like(p) for p in expected]
    v = [torch.zeros_like(p) for p in expected]
    steps = [0, 0, 0]

    def make(params):
        return LegacyAdamW([{"params": params, "weight_decay": weight_decay}], lr=1e-3, eps=1e-8, correct_bias=True)

    opt = make(params)
    for t in range(6):
        grads = [torch.randn(s, generator=gen) for s in shapes]
        untouched = torch.rand(shapes[0][0], generator=gen) > 0.02  # ~120 rows of 6,000 per step
        grads[0][untouched] = 0.0
        grads[0][untouched.nonzero()[:5, 0]] = -0.0
        for i, (p, g) in enumerate(zip(params, grads)):
            p.grad = None if (i == 2 and t == 2) else g.clone()
        if t == 3:  # resume: a fresh optimizer from the saved state
            saved = opt.state_dict()
            opt = make(params)
            opt.load_state_dict(saved)
        opt.step()
        for i, g in enumerate(grads):
            if i == 2 and t == 2:
                continue
            steps[i] += 1
            m[i] = m[i].mul(B1).add(g, alpha=1 - B1)
            v[i] = v[i].mul(B2).addcmul(g, g, value=1 - B2)
            size = 1e-3 * math.sqrt(1 - B2 ** steps[i]) / (1 - B1 ** steps[i])
            expected[i] = expected[i].addcdiv(m[i], v[i].sqrt().add(1e-8), value=-size)
            if weight_decay:
                expected[i] = expected[i].add(expected[i], alpha=-1e-3 * weight_decay)
    assert opt._active_rows[params[0]].sum() < shapes[0][0] // 2  # the row-wise path ran
    for p, e, mi, vi in zip(params, expected, m, v):
        assert torch.equal(p.detach(), e)
        assert torch.equal(opt.state[p]["exp_avg"], mi) and torch.equal(opt.state[p]["exp_avg_sq"], vi)
    assert "scratch" not in str(opt.state_dict()) and "active" not in str(opt.state_dict())


@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0, float("nan")])
def test_clip_gradients_leaves_the_gradients_torchs_clip_grad_norm_leaves(scale):
    """Within the bound (no scaling), across it and with a NaN gradient: the gradients and the
    returned norm equal bit for bit what ``torch.nn.utils.clip_grad_norm_`` gives."""
    from benchharness.training.optim import clip_gradients

    gen = torch.Generator().manual_seed(3)
    shapes = [(700, 48), (48,), (5,)]
    ours = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    theirs = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for a, b in zip(ours, theirs):
        g = torch.randn(a.shape, generator=gen) * scale / 100
        a.grad, b.grad = g.clone(), g.clone()
    ours.append(torch.nn.Parameter(torch.zeros(3)))  # no gradient: skipped by both
    norm = clip_gradients(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert torch.equal(norm, expected) or (norm.isnan() and expected.isnan())
    for a, b in zip(ours, theirs):
        assert torch.equal(a.grad, b.grad) or (a.grad.isnan().all() and b.grad.isnan().all())


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))],
)
def test_the_whole_tensor_path_gives_the_formula(device):
    """Off the chunked CPU path (a GPU tensor, or a non-contiguous CPU one) the step is the formula on
    whole tensors: over three steps of a transposed (non-contiguous) matrix, bit for bit the update
    computed out of place with the same device's kernels."""
    gen = torch.Generator().manual_seed(5)
    start = torch.randn(40, 30, generator=gen).t()
    p = torch.nn.Parameter(start.to(device))
    assert not p.is_contiguous()
    expected, m, v = p.detach().clone(), torch.zeros_like(p), torch.zeros_like(p)
    opt = LegacyAdamW([p], lr=1e-2, eps=1e-6, weight_decay=0.01, correct_bias=True)
    for t in range(1, 4):
        g = torch.randn(30, 40, generator=gen).to(device)
        p.grad = g.clone()
        opt.step()
        m = m.mul(B1).add(g, alpha=1 - B1)
        v = v.mul(B2).addcmul(g, g, value=1 - B2)
        size = 1e-2 * math.sqrt(1 - B2**t) / (1 - B1**t)
        expected = expected.addcdiv(m, v.sqrt().add(1e-6), value=-size)
        expected = expected.add(expected, alpha=-1e-2 * 0.01)
    assert torch.equal(p.detach(), expected)
