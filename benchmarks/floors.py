"""The FLOP floor of a piece of work: the time its matrix products and attention kernels alone need
on this machine, at their own shapes and dtypes.

The work (a training step's forward and backward, an encoder's forward on a batch) runs once under
``torch.utils.flop_counter.FlopCounterMode``, which counts its FLOPs, and under :class:`FloorOps`, a
dispatch mode that records every matrix product (``mm``, ``addmm``, ``bmm``, ``baddbmm``) and CPU
attention kernel with its arguments' shapes (FlopCounterMode does not count that kernel: its FLOPs
are added with torch's own SDPA formulas). Each recorded op is then replayed alone on random tensors
of its shapes and dtypes, best of several repeats: the sum is the floor. Everything else a step or an
encoding does (the optimizer update, dropout draws, normalisation, activations, tokenisation, Python)
is left out, so a measured time can approach the floor but not reach it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: the ops whose time is the floor: matrix products, and the fused attention kernels (one op for
#: QK^T, softmax and PV; torch's FlopCounterMode does not count the CPU one: counted here with its formulas)
PRODUCTS = {"mm", "addmm", "bmm", "baddbmm"}
CPU_ATTENTION = {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward"}
#: CUDA's fused attention kernels: FlopCounterMode counts their FLOPs itself, the floor times them
CUDA_ATTENTION = {
    f"_scaled_dot_product_{kind}_attention{suffix}"
    for kind in ("flash", "efficient", "cudnn")
    for suffix in ("", "_backward")
}

Call = tuple[Any, tuple[Any, ...], dict[str, Any]]


class FloorOps(TorchDispatchMode):
    """Records every matrix product and fused attention call: the op and its arguments' shapes,
    dtypes and device."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ in PRODUCTS | CPU_ATTENTION | CUDA_ATTENTION:
            meta = tuple((tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else a for a in args)
            self.calls.append((func, meta, dict(kwargs)))
        return func(*args, **kwargs)


def _is_tensor_meta(m: object) -> bool:
    return isinstance(m, tuple) and len(m) == 3 and isinstance(m[1], torch.dtype)


def _tensor(meta: tuple[Any, ...]) -> torch.Tensor:
    """A fresh tensor of a recorded shape, dtype and device: random floats, zeros of other dtypes
    (the seeds and offsets a CUDA attention backward takes)."""
    shape, dtype, device = meta
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device)
    return torch.zeros(shape, dtype=dtype, device=device)


def attention_flops(func, meta) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    shapes = [m[0] for m in meta if _is_tensor_meta(m)]
    if func.overloadpacket.__name__.endswith("_backward"):
        grad_out, query, key, value = shapes[0], shapes[1], shapes[2], shapes[3]
        return sdpa_backward_flop_count(grad_out, query, key, value)
    return sdpa_flop_count(shapes[0], shapes[1], shapes[2])


def replay_seconds(func, meta, kwargs, repeats: int = 7) -> float:
    """Best time of the op alone on fresh random tensors of the recorded shapes (on CUDA, timed
    from an idle device to the kernel's end)."""
    args = [_tensor(m) if _is_tensor_meta(m) else m for m in meta]
    cuda = any(_is_tensor_meta(m) and m[2] == "cuda" for m in meta)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    func(*args, **kwargs)  # warm the kernel choice
    best = float("inf")
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        func(*args, **kwargs)
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


class Floor:
    """FLOPs and floor seconds summed over pieces of work; each distinct op and shape is replayed
    once and its time reused (``replayed`` counts them)."""

    def __init__(self) -> None:
        self.flops = 0
        self.seconds = 0.0
        self.ops = 0
        self._timed: dict[str, float] = {}

    @property
    def replayed(self) -> int:
        return len(self._timed)

    def add(self, work: Callable[[], None], times: int = 1) -> None:
        """Run ``work`` once, recorded, and count it ``times`` times."""
        from torch.utils.flop_counter import FlopCounterMode

        ops = FloorOps()
        with FlopCounterMode(display=False) as counter, ops:
            work()
        flops = counter.get_total_flops() + sum(
            attention_flops(f, m) for f, m, _ in ops.calls if f.overloadpacket.__name__ in CPU_ATTENTION
        )
        seconds = 0.0
        with torch.no_grad():
            for func, meta, kwargs in ops.calls:
                key = repr((func, meta, sorted(kwargs.items())))
                if key not in self._timed:
                    self._timed[key] = replay_seconds(func, meta, kwargs)
                seconds += self._timed[key]
        self.flops += flops * times
        self.seconds += seconds * times
        self.ops += len(ops.calls) * times


def encoding_floor(
    model: torch.nn.Module, tokenizer, sentences: Sequence[str], max_length: int, token_budget: int
) -> Floor:
    """The floor of encoding ``sentences`` as the harness batches them (``encoders.inference``:
    equal-length batches of at most ``token_budget`` tokens): one forward per distinct batch shape,
    on that shape, counted as often as the shape occurs."""
    from benchharness.encoders.inference import token_batches, tokenize

    lengths = tokenize(tokenizer, sentences, max_length).lengths
    shapes = Counter((len(idx), int(lengths[idx[0]])) for idx in token_batches(lengths, token_budget))
    floor = Floor()
    model.eval()
    for (rows, length), times in sorted(shapes.items()):
        ids = torch.full((rows, length), int(tokenizer.cls_token_id or 0), dtype=torch.long)
        mask = torch.ones_like(ids)
        with torch.no_grad():  # not inference_mode: a dispatch mode sees no op on inference tensors
            floor.add(lambda ids=ids, mask=mask: model(input_ids=ids, attention_mask=mask), times)
    return floor
