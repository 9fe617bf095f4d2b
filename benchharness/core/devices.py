"""Device and precision choice, in one place so that every encoder and trainer agrees.

torch is imported when a device is picked, not when this module is: encoder families and tasks
import it at the top and must stay cheap to import. Encoders hold a ``DeviceChoice``, which picks
the default device only when a model first runs, so that a run served from the embedding cache
never imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from benchharness.core.errors import InvalidInputError

if TYPE_CHECKING:
    import torch

PRECISIONS = ("fp32", "fp16", "bf16")

#: /proc/cpuinfo flags of CPUs that compute in bf16 natively (AVX512-BF16 dot products, AMX tiles).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def pick_device(requested: str | None = None) -> torch.device:
    """``requested`` if given, else CUDA when present, else CPU.

    A requested device that this machine does not have is refused here, with what it has, rather
    than when the first tensor moves there (after a model has loaded)."""
    import torch

    if not requested:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError):
        raise InvalidInputError(f"--device {requested!r} is not a device; use cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InvalidInputError(
                f"--device {requested}: this machine has no CUDA device (or torch "
                f"{torch.__version__} was built without CUDA); use --device cpu or leave --device out"
            )
        if device.index is not None and device.index >= count:
            raise InvalidInputError(
                f"--device {requested}: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}"
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise InvalidInputError(f"--device {requested}: MPS is not available on this machine; use --device cpu")
    return device


def checked_batch_size(name: str, batch_size: int | str) -> int:
    """``batch_size`` as a positive int, else one line naming the encoder."""
    value = int(batch_size)
    if value < 1:
        raise InvalidInputError(f"encoder {name!r}: batch_size must be a positive number, got {batch_size}")
    return value


class DeviceChoice:
    """The device of an encoder, chosen when first needed.

    A ``requested`` device is checked at once (a typo or a missing GPU fails before anything
    loads); the default (CUDA when present, else CPU) is picked at the first ``get()``, which
    imports torch: an encoder whose vectors all come from the cache never gets there.
    """

    def __init__(self, requested: str | None = None) -> None:
        self.requested = requested or None
        self._device: torch.device | None = pick_device(requested) if requested else None

    def get(self) -> torch.device:
        if self._device is None:
            self._device = pick_device(self.requested)
        return self._device

    @property
    def chosen(self) -> str | None:
        """The device as results record it, or None while none was needed (nothing ran a model)."""
        return None if self._device is None else str(self._device)


def has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512-BF16 or AMX); without it bf16 is emulated
    by widening to fp32, which is slower than fp32 and changes scores for nothing."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


def check_precision(precision: str, device: torch.device) -> str:
    """The precision rule of every encoder and trainer: fp32 anywhere; fp16 and bf16 on CUDA (bf16
    where the GPU supports it); bf16 also on CPUs with native bf16 (AVX512-BF16, AMX), where
    autocast roughly doubles matrix-product throughput for a small score change (bounded at 0.05).
    fp16 on CPU is slow, and emulated bf16 is slower than fp32 and changes scores for nothing:
    both refused with the reason.

    fp32 needs no device (and no torch): ``device`` is not looked at."""
    if precision not in PRECISIONS:
        raise InvalidInputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return precision
    if precision == "bf16" and device.type == "cpu":
        if not has_native_bf16():
            raise InvalidInputError(
                "precision=bf16 on CPU needs native bf16 instructions (CPU flag avx512_bf16 or amx_bf16, "
                "see /proc/cpuinfo); this CPU has neither, so bf16 would be emulated in fp32, slower than "
                "fp32 and with changed scores. Use precision=fp32 here, or bf16 on a CUDA device."
            )
        return precision
    if device.type != "cuda":
        raise InvalidInputError(f"precision={precision} needs a CUDA device; this run is on {device}")
    import torch

    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise InvalidInputError("precision=bf16 is not supported by this GPU; use fp16")
    return precision


@contextlib.contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    """Mixed precision (autocast) for fp16/bf16 (on CUDA, or bf16 on a CPU ``check_precision``
    allowed); a no-op for fp32."""
    if precision == "fp32":
        yield
        return
    import torch

    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield
