"""Resource measurement shared by runs, training and benchmarks: peak memory, in MiB."""

from __future__ import annotations

import resource
import sys
from typing import Any


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peak_cuda_mib(device: Any) -> float | None:
    """Peak GPU memory allocated by torch on ``device``, or None off CUDA (torch not imported here
    unless the caller already uses it)."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(device, "type", str(device).split(":")[0]) != "cuda":
        return None
    return float(torch.cuda.max_memory_allocated(device)) / 2**20


def peak_memory(device: Any = "cpu") -> dict[str, float]:
    """``peak_rss_mib`` and, on CUDA, ``peak_cuda_mib``: what manifests and benchmarks report."""
    out = {"peak_rss_mib": peak_rss_mib()}
    cuda = peak_cuda_mib(device)
    if cuda is not None:
        out["peak_cuda_mib"] = cuda
    return out
