"""Device and precision choice, in one place so that every encoder and trainer agrees.

torch is imported when a device is picked, not when this module is: encoder families and tasks
import it at the top and must stay cheap to import. Encoders hold a ``DeviceChoice``, which picks
the default device only when a model first runs, so that a run served from the embedding cache
never imports torch.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

from benchharness.core.errors import InvalidInputError

if TYPE_CHECKING:
    import torch

PRECISIONS = ("fp32", "fp16", "bf16")


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
            raise InvalidInputError(f"--device {requested}: this machine has no CUDA device (or torch "
                             f"{torch.__version__} was built without CUDA); use --device cpu or leave --device out")
        if device.index is not None and device.index >= count:
            raise InvalidInputError(f"--device {requested}: this machine has {count} CUDA device(s), "
                             f"cuda:0..cuda:{count - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise InvalidInputError(f"--device {requested}: MPS is not available on this machine; use --device cpu")
    return device


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


def check_precision(precision: str, device: torch.device) -> str:
    """Reduced precision only on CUDA: on CPU fp16 is slow and bf16 changes scores for no gain.

    fp32 needs no device (and no torch): ``device`` is not looked at."""
    if precision not in PRECISIONS:
        raise InvalidInputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return precision
    if device.type != "cuda":
        raise InvalidInputError(f"precision={precision} needs a CUDA device; this run is on {device}")
    import torch

    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise InvalidInputError("precision=bf16 is not supported by this GPU; use fp16")
    return precision


@contextlib.contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    """Mixed precision (autocast) for fp16/bf16 on CUDA; a no-op for fp32."""
    if precision == "fp32":
        yield
        return
    import torch

    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield
