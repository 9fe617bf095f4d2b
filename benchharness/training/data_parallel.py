"""Data-parallel training (DistributedDataParallel): one process per device, started by torchrun,
each training on its own slice of every global batch.

How a run is laid out, and why:

- **launch**: ``benchharness train <method> ... --nproc N`` starts ``torchrun --standalone
  --nproc-per-node N`` on the same ``train`` command (:func:`launch`); ``torchrun ... -m
  benchharness.cli train ...`` typed directly works the same, its world size standing for
  ``--nproc``. The processes find one another through torchrun's environment (``WORLD_SIZE``,
  ``RANK``, ``LOCAL_RANK``).
- **process group**: gloo for CPU tensors, NCCL for CUDA tensors (``cpu:gloo,cuda:nccl`` when
  CUDA is present, so that object broadcasts and barriers stay on gloo); a process on CUDA trains
  on ``cuda:LOCAL_RANK``. The losses' collectives run on a process group of their own, so that
  the backward all-reduce of a gather can never interleave with DDP's bucketed gradient
  all-reduces, whose launch order depends on when each bucket becomes ready.
- **data**: every rank computes the same seeded batch order (``loop.batch_order``) and takes its
  contiguous slice of each global batch (:func:`local_rows`), so the slices, gathered in rank
  order, are the single-process batch in its order.
- **losses**: a loss over in-batch negatives sees every rank's rows (:func:`in_batch`): by default
  gathered *with* gradients (``gather-grad``), which makes DDP's averaged gradient exactly the
  single-process gradient of the mean loss over the global batch; or gathered as SimCSE's
  official code does (``gather-detached``), where only this rank's rows carry gradient (DDP's
  average is then the single-process gradient divided by the world size). A loss
  averaged over tokens rather than examples is normalised by the global token count
  (:func:`global_mean`).
- **rank 0 writes**: dev evaluation, checkpoints, ``metrics.jsonl``, the model and the manifest
  are rank 0's; the other ranks wait for its decisions (:func:`from_main`, :func:`broadcast`).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from benchharness.core.errors import InvalidInputError

logger = logging.getLogger(__name__)

#: the variables torchrun sets in every process it starts
ENVIRONMENT = ("WORLD_SIZE", "RANK", "LOCAL_RANK")

T = TypeVar("T")


@dataclass(frozen=True)
class Context:
    """This process's place in a data-parallel run."""

    world_size: int
    rank: int
    local_rank: int
    negatives: str  # one of options.NEGATIVES
    device: torch.device  # the device this process trains on
    group: dist.ProcessGroup  # the losses' own process group


_context: Context | None = None
_loss_group: dist.ProcessGroup | None = None


def launched_world_size() -> int:
    """How many processes torchrun started this one among (``WORLD_SIZE``); 1 outside torchrun."""
    if not all(name in os.environ for name in ENVIRONMENT):
        return 1
    return int(os.environ["WORLD_SIZE"])


def rank() -> int:
    """This process's rank (torchrun's ``RANK``); 0 outside torchrun. Known before the process group
    exists, so that code outside the loop (the run store, manifests) can leave writing to rank 0."""
    return int(os.environ["RANK"]) if launched_world_size() > 1 else 0


def is_main() -> bool:
    """Whether this process writes the run's files: rank 0, or the only process."""
    return rank() == 0


def check_launch(nproc: int, device: torch.device) -> None:
    """Refuse a process layout the run cannot train with, before any model loads: ``nproc`` > 1
    outside torchrun, a torchrun world of another size, more processes than CUDA devices, or a
    fixed CUDA index (each process takes ``cuda:LOCAL_RANK``)."""
    world = launched_world_size()
    if nproc > 1 and world == 1:
        raise InvalidInputError(
            f"this run trains with {nproc} processes (nproc {nproc}) and must start under "
            f"torchrun: `benchharness train <method> ... --nproc {nproc}` launches it"
        )
    if world > 1 and world != nproc:
        raise InvalidInputError(
            f"torchrun started {world} processes but the run's nproc is {nproc}; pass "
            f"--nproc {world} (the world size is part of the recipe)"
        )
    if nproc > 1 and device.type == "cuda":
        if device.index is not None:
            raise InvalidInputError(
                f"--device {device}: under data-parallel training each process uses cuda:LOCAL_RANK; pass --device cuda"
            )
        if nproc > torch.cuda.device_count():
            raise InvalidInputError(
                f"--nproc {nproc}: this machine has {torch.cuda.device_count()} CUDA "
                "device(s), one per process; lower --nproc or pass --device cpu"
            )


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def init_process_group() -> None:
    """Join torchrun's process group (once per process): gloo, plus NCCL for CUDA tensors when CUDA
    is present. The losses get their own group (see the module docstring)."""
    global _loss_group
    if dist.is_initialized():
        return
    backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    _loss_group = dist.new_group(backend=backend)
    atexit.register(_destroy)


def start(nproc: int, negatives: str, device: torch.device) -> Context | None:
    """The data-parallel context of a run (None for a single process), made this process's current
    one, which the losses read through :func:`in_batch` and :func:`global_mean` (a method's module
    knows no config); ``device`` is the device picked for the run."""
    global _context
    check_launch(nproc, device)
    if nproc == 1:
        _context = None
        return None
    init_process_group()
    local_rank = int(os.environ["LOCAL_RANK"])
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    assert _loss_group is not None
    _context = Context(dist.get_world_size(), dist.get_rank(), local_rank, negatives, device, _loss_group)
    return _context


def rank_seed(seed: int, ctx: Context | None) -> int:
    """The seed of this rank's random streams (dropout, augmentations): the run's seed on rank 0,
    an unrelated one derived from (seed, rank) elsewhere, so that ranks do not draw the same
    dropout masks and augmentations for their different rows."""
    if ctx is None or ctx.rank == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}/rank{ctx.rank}".encode()).digest()[:4], "little")


def wrap(method: nn.Module, ctx: Context) -> nn.Module:
    """``method`` in DistributedDataParallel.

    ``find_unused_parameters=True``: which parameters a step's loss reaches depends on the method
    and on the batch (BERT's pooler is computed but read by no loss of SimCSE, ConSERT or PaSeR;
    PaSeR's LM head gets no gradient on a rank whose rows have nothing to decode while MLM is off;
    ConSERT's classifier exists only for the supervised objectives), so a fixed list of excluded
    modules would be wrong for some batch; the per-step search of the autograd graph costs little
    next to a transformer's forward. A parameter unused on every rank keeps no gradient (None), so
    the optimizer skips it exactly as in a single process.

    ``forward_sync_buffers=False``: no buffer changes during training (no batch norm in these models),
    and DefSent+'s frozen entry matrix, a buffer of entries x hidden floats, would otherwise be sent
    to every rank at every step. DDP still copies rank 0's parameters and buffers once, here.
    """
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(
        method, device_ids=device_ids, find_unused_parameters=True, forward_sync_buffers=False
    )


def local_rows(rows: np.ndarray, ctx: Context) -> np.ndarray:
    """This rank's contiguous slice of a global batch's example indices: equal slices when the
    batch divides by the world size (the options require it of ``batch_size``), sizes one
    apart for a last partial batch (``drop_last=False``), in rank order."""
    return np.array_split(rows, ctx.world_size)[ctx.rank]


def example_share(n_local: int, n_global: int, ctx: Context) -> float:
    """The factor on a rank's per-example mean loss that makes DDP's gradient average the mean
    over the global batch when slices differ in size (a last partial batch): ``W n_local / N``."""
    return ctx.world_size * n_local / n_global


class _GatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 whose backward returns to each rank the gradient that *every* rank's
    loss sends to its rows (an all-reduce of the gathered gradient, then this rank's slice).

    The sum is what makes ``gather-grad`` exact: rank r's loss depends on every rank's rows, so
    the gradient of the sum of the ranks' losses w.r.t. rank r's rows is the sum of their parts.
    An all-reduce rather than a reduce-scatter because gloo has no reduce-scatter, and
    ``torch.distributed.nn.functional.all_gather`` is deprecated in this torch; the extra traffic
    is a batch of embeddings."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, tensor, group=group)
        ctx.group, ctx.rank, ctx.rows = group, dist.get_rank(group), tensor.shape[0]
        return torch.cat(parts)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=ctx.group)
        return total[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows], None


def _gather_detached(tensor: torch.Tensor, ctx: Context) -> torch.Tensor:
    """SimCSE's gather: every rank's rows without gradient, this rank's own rows put back."""
    parts = [torch.empty_like(tensor) for _ in range(ctx.world_size)]
    dist.all_gather(parts, tensor.contiguous(), group=ctx.group)
    parts[ctx.rank] = tensor
    return torch.cat(parts)


def in_batch(*local: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
    """What a loss over in-batch negatives scores: ``(anchors, candidates, offset)`` for each of
    the ``local`` tensors (this rank's rows, equal in number on every rank), where anchor row i's
    positive is candidate row ``offset + i``.

    - single process: anchors = candidates = ``local``, offset 0 (the loss is unchanged);
    - ``gather-grad``: anchors are this rank's rows, candidates every rank's rows in rank order,
      gathered with gradient; offset = rank x rows. Each rank's loss is the mean over its anchors,
      and DDP's average of the ranks' gradients is then the gradient of the mean loss over the
      global batch, as a single process computes it;
    - ``gather-detached`` (SimCSE's official code): anchors = candidates = every rank's rows, only
      this rank's own carrying gradient; offset 0. Each rank computes the full batch's loss but
      differentiates it through its own rows only, so DDP's average is the single-process gradient
      divided by the world size (and differently clipped).
    """
    ctx = _context
    if ctx is None:
        return list(local), list(local), 0
    if ctx.negatives == "gather-detached":
        full = [_gather_detached(t, ctx) for t in local]
        return full, full, 0
    gathered = [_GatherWithGrad.apply(t, ctx.group) for t in local]
    return list(local), gathered, ctx.rank * local[0].shape[0]


def global_mean(local_mean: torch.Tensor, count: int) -> torch.Tensor:
    """A loss averaged over ``count`` items of this rank (tokens, whose number differs between
    ranks) turned into this rank's share of the mean over every rank's items: ``W x local sum /
    global count``, so that DDP's gradient average is the gradient of the global mean. Unchanged
    in a single process. Every rank must call it (the count is all-reduced)."""
    ctx = _context
    if ctx is None:
        return local_mean
    total = torch.tensor([float(count)], device=ctx.device)
    dist.all_reduce(total, group=ctx.group)
    if total.item() == 0:
        return local_mean
    return local_mean * (ctx.world_size * count / total.item())


def sum_over_ranks(values: Sequence[float], ctx: Context) -> list[float]:
    """Element-wise sums of ``values`` over the ranks (logged losses, sentences counted)."""
    total = torch.tensor(list(values), dtype=torch.float64)
    dist.all_reduce(total, group=ctx.group)
    return total.tolist()


def broadcast(value: T, ctx: Context | None) -> T:
    """Rank 0's ``value`` on every rank (any picklable object)."""
    if ctx is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def from_main(compute: Callable[[], T], ctx: Context | None) -> T:
    """``compute()`` run on rank 0 only, its result (or the exception it raised) on every rank, so
    that a refusal on rank 0 (an output folder in the way) stops every rank with the same error."""
    if ctx is None:
        return compute()
    outcome: tuple[bool, Any] = (True, None)
    if ctx.rank == 0:
        try:
            outcome = (True, compute())
        except Exception as exc:  # sent to the other ranks, raised again on every rank
            outcome = (False, exc)
    ok, value = broadcast(outcome, ctx)
    if not ok:
        raise value
    return value


def gather_objects(value: T, ctx: Context) -> list[T]:
    """Every rank's ``value``, in rank order, on every rank."""
    values: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(values, value)
    return values


def barrier(ctx: Context | None) -> None:
    if ctx is not None:
        dist.barrier()


def launch(nproc: int, module: str, argv: list[str]) -> int:
    """Run ``python -m <module> <argv>`` in ``nproc`` processes on this machine through torchrun
    (:func:`torchrun`, in a process of its own) and wait; returns torchrun's exit status."""
    logger.info(
        "data-parallel training in %d processes: torchrun --standalone --nproc-per-node %d -m %s %s",
        nproc,
        nproc,
        module,
        shlex.join(argv),
    )
    return subprocess.run([sys.executable, "-m", __name__, str(nproc), module, *argv], check=False).returncode


def torchrun(nproc: int, module: str, argv: list[str]) -> None:
    """``torchrun --standalone --nproc-per-node <nproc> -m <module> <argv>``, its parser told not to
    abbreviate: argparse reads every word of the command line as a possible torchrun option, and
    would refuse ``--nproc`` (and PaSeR's ``--m`` and ``--n``) as ambiguous abbreviations of its own
    options even after the module name."""
    from torch.distributed.run import get_args_parser, run

    parser = get_args_parser()
    parser.allow_abbrev = False
    run(parser.parse_args(["--standalone", f"--nproc-per-node={nproc}", "-m", module, *argv]))


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    record(torchrun)(int(sys.argv[1]), sys.argv[2], sys.argv[3:])  # as torchrun's main: failed ranks summarised
