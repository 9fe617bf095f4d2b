"""What the command line sets for its whole process, and nothing else does.

A library call (``benchharness.evaluate``, the resolver, an encoder) leaves the process as it
found it: ``os.environ``, torch's thread count, oneDNN's settings. The command line owns its
process, so it configures it once, first thing in ``main``, before torch is imported:

- the Hugging Face cache and offline mode of benchharness.toml, exported for every library that
  reads them at import (``core.settings.apply_environment``; library code passes them explicitly);
- oneDNN's kernel cache at one entry, unless the command line asks for bf16 or the user set it.

oneDNN, which runs PyTorch's GELU on x86 CPUs, JIT-compiles one kernel per tensor shape and by
default caches up to 1024 of them, ~4.7 MB each. Exact-length batches have a few hundred shapes,
so the cache alone held ~400 MB by the end of an STS suite (peak RSS 1.0-1.2 GB, above
sentence-transformers'). One entry still serves every layer of a batch (they share its shape);
the kernels are the same, so are the vectors. Measured on 8,000 STS sentences, minilm-l3: RSS
after encoding 1,035-1,082 MB with the default, 594 MB with one entry, same encode time.
oneDNN reads the capacity once per process, and bf16 autocast runs every matrix product through
it, so a bf16 training step needs many kernels at once (with one entry PaSeR's bf16 steps were
markedly slower than with the default): a command line that names bf16 keeps the default. A
recipe trained on demand in bf16 under a name without "bf16" gets the one entry (slower steps,
same weights); ``benchharness train`` of it, or ``ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024``, avoids that.
- glibc's allocator keeps freed blocks of any size for reuse (``keep_freed_memory``).

glibc serves a block above its mmap threshold (at most 32 MB) with fresh pages from the kernel and
unmaps it on free, so each such tensor pays one page fault per 4 KB when it is first written. A
training step makes several: the word-embedding gradient of a MiniLM is 47 MB, PaSeR's vocabulary
logits 125 MB. ``torch.zeros(30522, 384)`` takes 10 ms that way and 0.9 ms from reused memory
(this 2-core AVX512-BF16 VM). Kept blocks count in the resident size until the process ends, which
its peak already did.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Sequence

from benchharness.core.settings import Config, apply_environment

ONEDNN_CACHE_ENV, ONEDNN_CACHE_CAPACITY = "ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1"
#: glibc's mallopt parameters (malloc.h) and the size up to which blocks come from the reused heap
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, HEAP_UP_TO = -1, -3, 1 << 30


def asks_for_bf16(argv: Sequence[str]) -> bool:
    """Whether the command line names bf16 anywhere: ``--precision bf16``, ``precision=bf16`` in
    an encoder spec, a recipe named for it."""
    return any("bf16" in arg for arg in argv)


def configure(argv: Sequence[str], config: Config) -> None:
    """Set up this process for the command ``argv`` and its configuration, without overriding what
    the user's environment already says."""
    apply_environment(config)
    if not asks_for_bf16(argv):  # read by oneDNN at its first kernel: before anything computes
        os.environ.setdefault(ONEDNN_CACHE_ENV, ONEDNN_CACHE_CAPACITY)
    keep_freed_memory()


def keep_freed_memory() -> bool:
    """Let glibc reuse freed blocks up to 1 GB instead of returning them to the kernel (see the
    module docstring); True where it took effect. Elsewhere (macOS, musl, Windows) nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_UP_TO)) and bool(mallopt(M_TRIM_THRESHOLD, 2 * HEAP_UP_TO))
