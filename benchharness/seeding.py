"""One way to seed every random source a run touches, so that a seed means the same thing in
evaluation and in training.

torch is imported only when it is already loaded or installed: a GloVe-only run need not pay for
importing it, yet a run that uses torch gets its CPU and CUDA generators seeded too.
"""

from __future__ import annotations

import random
import sys

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # NumPy's legacy seed must fit 32 bits; Python's and torch's need not
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a dependency
            return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
