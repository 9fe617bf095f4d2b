"""``kept_random_state``: a training call leaves the caller's random streams where they were,
CUDA's included, whose generators only exist once CUDA starts (simulated here: this machine has no
GPU; ``tests/cuda/test_cuda.py`` checks the same on a real device)."""

from __future__ import annotations

import random

import numpy as np
import torch

from benchharness.core.seeding import kept_random_state, seed_everything


def test_the_callers_python_numpy_and_torch_streams_go_on_as_if_the_block_had_not_run():
    seed_everything(7)
    expected = (random.random(), float(np.random.rand()), torch.rand(2).tolist())
    seed_everything(7)
    with kept_random_state():
        seed_everything(99)
        random.random(), np.random.rand(), torch.rand(5)
    assert (random.random(), float(np.random.rand()), torch.rand(2).tolist()) == expected


def test_a_block_that_starts_cuda_leaves_its_generators_seeded_as_their_first_use_would_find_them(monkeypatch):
    started: list[bool] = []
    cuda_seeds: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: bool(started))
    monkeypatch.setattr(torch.cuda, "manual_seed_all", cuda_seeds.append)
    torch.manual_seed(7)  # queues 7 for CUDA (here: the recorder notes it)
    assert cuda_seeds == [7]
    with kept_random_state():
        started.append(True)  # the block is the first to use CUDA
        seed_everything(99)
    assert cuda_seeds == [7, 99, 7]  # seeded back with the caller's seed, what CUDA would have started from
    assert torch.initial_seed() == 7


def test_a_block_that_does_not_start_cuda_touches_no_cuda_generator(monkeypatch):
    cuda_seeds: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", cuda_seeds.append)
    torch.manual_seed(7)
    with kept_random_state():
        seed_everything(99)
    assert cuda_seeds == [7, 99]  # the caller's and the block's own seeds; nothing added on the way out
