"""One way to seed every random source a run touches, so that a seed means the same thing in
evaluation and in training.

torch is seeded without being imported: importing it costs seconds, and a run whose vectors all
come from the embedding cache (or a GloVe-only run) never needs it. When torch is not loaded yet,
the seed is kept and applied the moment torch is first imported (an import hook on ``sys.meta_path``
seeds it right after ``torch/__init__`` has run). Nothing can draw from torch's generators before
torch exists, so this leaves them in exactly the state an immediate ``torch.manual_seed`` would:
the first torch random number after ``seed_everything(s)`` is the same either way.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import random
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np


def _seed_torch(torch: Any, seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


class _SeedOnImport(importlib.abc.MetaPathFinder):
    """Seeds torch right after its first import with the latest seed asked for, then leaves."""

    def __init__(self) -> None:
        self.seed: int | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch" or self.seed is None:
            return None
        for finder in sys.meta_path:  # the spec the import would have found without us
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None  # not installed: the import fails as it would have
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _SeedAfterExec(spec.loader, self)
        return spec

    def torch_loaded(self, module: ModuleType) -> None:
        seed, self.seed = self.seed, None
        uninstall()
        if seed is not None:
            _seed_torch(module, seed)


class _SeedAfterExec(importlib.abc.Loader):
    """torch's own loader, followed by the pending seed; it hands the module back its loader."""

    def __init__(self, loader: importlib.abc.Loader, hook: _SeedOnImport) -> None:
        self.loader, self.hook = loader, hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def __getattr__(self, name: str) -> Any:  # get_code, is_package, get_resource_reader...
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.hook.torch_loaded(module)


_hook = _SeedOnImport()


def uninstall() -> None:
    """Forget a pending torch seed (tests; and once torch has been seeded on import)."""
    _hook.seed = None
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)


def pending_torch_seed() -> int | None:
    """The seed torch will get when it is first imported (None when none is pending)."""
    return _hook.seed


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and every CUDA device):
    now if torch is loaded, else as soon as it is."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # NumPy's legacy seed must fit 32 bits; Python's and torch's need not
    torch = sys.modules.get("torch")
    if torch is not None:
        uninstall()
        _seed_torch(torch, seed)
        return
    _hook.seed = seed
    if _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)


@contextlib.contextmanager
def kept_random_state() -> Iterator[None]:
    """Run the block, then put back the state of every generator ``seed_everything`` seeds: Python's
    ``random``, NumPy's global generator and torch's (CPU and CUDA), with any pending seed. A library
    call that trains seeds them all; the caller's own random stream goes on after it as if the call
    had not happened. A torch first imported inside the block is left as a fresh import leaves it:
    seeded by the pending seed if there was one, else from the operating system's randomness.

    CUDA's generators exist only once CUDA is initialised. When the block is the first to initialise
    it, they are put back as that first use would have found them after the caller's
    ``torch.manual_seed`` (or ``torch.seed``), which queues the same seed for CUDA: seeded with
    torch's initial seed. A seed given to ``torch.cuda.manual_seed`` alone before CUDA starts is not
    seen, and a caller who never seeded gets a stream seeded by torch's own initial seed."""
    python_state, numpy_state, pending = random.getstate(), np.random.get_state(), pending_torch_seed()
    torch = sys.modules.get("torch")
    torch_state = cuda_state = cuda_seed = None
    if torch is not None:
        torch_state = torch.get_rng_state()
        if torch.cuda.is_initialized():
            cuda_state = torch.cuda.get_rng_state_all()
        else:
            cuda_seed = torch.initial_seed()
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        uninstall()
        torch = sys.modules.get("torch")
        if torch is None:
            if pending is not None:
                _hook.seed = pending
                sys.meta_path.insert(0, _hook)
        elif torch_state is not None:
            torch.set_rng_state(torch_state)
            if cuda_state is not None:
                torch.cuda.set_rng_state_all(cuda_state)
            elif cuda_seed is not None and torch.cuda.is_initialized():
                torch.cuda.manual_seed_all(cuda_seed)
        elif pending is not None:
            _seed_torch(torch, pending)
        else:
            torch.seed()
