"""The row-by-row word-embedding gradient (``encoders/methods/embedding_grad.py``) against torch's own
dense embedding backward and autograd's accumulation, bit for bit."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from benchharness.encoders.methods.embedding_grad import eligible, rowwise_gradient


class ThreePasses(nn.Module):
    """An embedding used by three passes a step (as PaSeR's encoder, decoder input and MLM), each
    with its own downstream weights, so the passes' gradients differ and all reach the same rows."""

    def __init__(self, vocab: int = 50, width: int = 8, padding_idx: int | None = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, width, padding_idx=padding_idx)
        self.heads = nn.ParameterList([nn.Parameter(torch.randn(width) * 10.0 ** (2 - 2 * k)) for k in range(3)])

    def forward(self, batches: list[torch.Tensor]) -> torch.Tensor:
        # a different weight per token: the rows' contributions differ, so their order shows
        return sum(
            ((self.embedding(ids) * h) ** 2 * token_weights(ids.shape, k)).sum()
            for k, (ids, h) in enumerate(zip(batches, self.heads))
        )


def token_weights(shape: torch.Size, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + k)
    return torch.randn(*shape, 1, generator=g) * 10.0 ** torch.randint(-4, 5, (*shape, 1), generator=g)


def batches(step: int, vocab: int = 50) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    # few distinct ids: many repeats per row, so the order of the additions shows in the floats
    return [torch.randint(0, vocab // 4, (6, 9), generator=g) for _ in range(3)]


def grads_over_steps(model: nn.Module, rowwise: bool, steps: int = 4, scale_between: float = 1.0) -> list[torch.Tensor]:
    out = []
    with rowwise_gradient(model, model.embedding) if rowwise else _nothing() as applied:
        assert applied is (True if rowwise else None)
        for step in range(steps):
            model.zero_grad(set_to_none=True)
            model(batches(step)).backward()
            out.append(model.embedding.weight.grad.clone())
            if scale_between != 1.0:  # as gradient clipping does, in place (NaN: a non-finite norm)
                model.embedding.weight.grad.mul_(scale_between)
    return out


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.view(torch.int32), b.view(torch.int32))


@pytest.mark.parametrize("padding_idx", [0, None])
@pytest.mark.parametrize("scale_between", [1.0, 0.5, float("nan")])
def test_three_passes_equal_torch_bit_for_bit(padding_idx, scale_between):
    torch.manual_seed(0)
    reference = ThreePasses(padding_idx=padding_idx)
    model = copy.deepcopy(reference)
    with torch.no_grad():  # mixed magnitudes: summing in another order would change the last bits
        reference.embedding.weight.mul_(torch.logspace(-3, 3, 8))
        model.embedding.weight.copy_(reference.embedding.weight)
    expected = grads_over_steps(reference, rowwise=False, scale_between=scale_between)
    got = grads_over_steps(model, rowwise=True, scale_between=scale_between)
    for e, g in zip(expected, got):
        assert bitwise_equal(e, g)
    if padding_idx is not None:
        assert torch.count_nonzero(got[0][padding_idx]) == 0


def test_negative_zero_and_untouched_rows_are_positive_zero():
    emb = nn.Embedding(10, 4)
    ids = torch.tensor([[1, 1, 2]])
    grad = torch.tensor([[[-0.0] * 4, [-0.0] * 4, [1.0, -0.0, 0.0, 2.0]]])
    expected = torch.ops.aten.embedding_dense_backward(grad, ids, 10, -1, False)
    with rowwise_gradient(emb, emb):
        emb(ids).backward(grad)
    assert bitwise_equal(emb.weight.grad, expected)
    assert not torch.signbit(emb.weight.grad).any()


def test_accumulating_backward_falls_back_to_torch():
    """A second backward without zero_grad adds its passes' sum to the gradient, as autograd does."""
    torch.manual_seed(1)
    reference = ThreePasses()
    model = copy.deepcopy(reference)
    accumulated = []
    for m, rowwise in ((reference, False), (model, True)):
        with rowwise_gradient(m, m.embedding) if rowwise else _nothing():
            m.zero_grad(set_to_none=True)
            m(batches(0)).backward()
            m(batches(1)).backward()
            accumulated.append(m.embedding.weight.grad.clone())
            m.zero_grad(set_to_none=True)  # a new step after the accumulated one
            m(batches(2)).backward()
    assert bitwise_equal(*accumulated)
    assert bitwise_equal(reference.embedding.weight.grad, model.embedding.weight.grad)


def test_large_batch_over_threads_equals_torch():
    """BERT's width and a batch of 64 x 32 tokens (the index_add runs over both threads)."""
    torch.manual_seed(2)
    emb = nn.Embedding(3000, 384, padding_idx=0)
    ids = torch.randint(0, 200, (64, 32))
    ids[:, 20:] = 0
    grad = torch.randn(64, 32, 384) * torch.logspace(-4, 4, 32).view(1, 32, 1)
    expected = torch.ops.aten.embedding_dense_backward(grad, ids, 3000, 0, False)
    with rowwise_gradient(emb, emb):
        emb(ids).backward(grad)
    assert bitwise_equal(emb.weight.grad, expected)


def test_not_eligible_leaves_torch_in_charge():
    tied = ThreePasses()
    head = nn.Linear(8, 50, bias=False)
    head.weight = tied.embedding.weight
    tied.head = head
    assert not eligible(tied, tied.embedding)
    assert not eligible(nn.Embedding(5, 2, sparse=True), nn.Embedding(5, 2, sparse=True))
    emb = nn.Embedding(5, 2, max_norm=1.0)
    assert not eligible(emb, emb)
    emb = nn.Embedding(5, 2)
    emb.weight.requires_grad_(False)
    with rowwise_gradient(emb, emb) as applied:
        assert not applied


def test_module_restored_and_inference_untouched():
    emb = nn.Embedding(5, 2)
    with rowwise_gradient(emb, emb) as applied:
        assert applied and "forward" in vars(emb)
        with torch.no_grad():
            out = emb(torch.tensor([1, 2]))
        assert out.grad_fn is None
    assert "forward" not in vars(emb)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_under_bf16_autocast_equals_torch():
    """A bf16 training step (``--precision bf16``): the lookup stays fp32, the layer after it runs in
    bf16, and the embedding's gradient is torch's, bit for bit."""
    torch.manual_seed(3)
    reference = nn.Sequential(nn.Embedding(40, 16, padding_idx=0), nn.Linear(16, 16))
    model = copy.deepcopy(reference)
    ids = torch.randint(0, 10, (8, 12))
    for m, rowwise in ((reference, False), (model, True)):
        with rowwise_gradient(m, m[0]) if rowwise else _nothing(), torch.autocast("cpu", dtype=torch.bfloat16):
            for _ in range(2):
                m.zero_grad(set_to_none=True)
                m(ids).float().pow(2).sum().backward()
    assert bitwise_equal(reference[0].weight.grad, model[0].weight.grad)
