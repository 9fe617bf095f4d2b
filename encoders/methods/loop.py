"""The training loop every method shares (ConSERT, SimCSE, PaSeR, DefSent+).

What it does: deterministic seeding and data order (a seeded permutation per epoch, recomputed on
resumption); AdamW (weight decay off for biases and LayerNorm; ``config.optimizer`` picks
``torch.optim.AdamW`` or the legacy ``transformers.AdamW`` of the methods' official code,
``optim.py``) with linear warmup and linear decay; device and precision from
``benchharness.core.devices`` (CUDA and fp16 autocast + GradScaler, or bf16); optional gradient
clipping (global norm, before the optimizer step); periodic dev evaluation through a callback,
best-checkpoint selection and early stopping (``patience`` evaluations without improvement); tqdm
progress; ``metrics.jsonl``; a resumable checkpoint (``resume.py``); and the output folder::

    <out>/model/          encoder weights + tokenizer (save_pretrained), training heads excluded
    <out>/manifest.json   the run's typed record (``manifest.py``), which makes the folder an encoder
    <out>/metrics.jsonl   one JSON object per logged step / evaluation

Data-parallel runs (``config.nproc`` > 1, started by torchrun; ``data_parallel.py``): each process
trains on its contiguous slice of every global batch, DDP averages the gradients; rank 0 alone
evaluates and writes (metrics, checkpoints, model, manifest) and broadcasts its decisions (early
stopping, the best step), so that every rank takes the same steps.

The loop knows no evaluation task: the caller hands it ``dev``, a function from the encoder being
trained to a score (higher is better); ``benchharness train`` passes the harness's STS-B dev
evaluator (``benchharness.training.dev_eval``), so a dev score is the one the harness reproduces.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from benchharness.core.cpu_share import kept_threads
from benchharness.core.devices import autocast, check_precision, pick_device
from benchharness.core.errors import DivergedError, InvalidInputError
from benchharness.core.progress import shown
from benchharness.core.seeding import seed_everything
from benchharness.encoders import hub
from benchharness.encoders.methods import data_parallel
from benchharness.encoders.methods.base_model import base_folder
from benchharness.encoders.methods.manifest import RunManifest, build_manifest, code_version, write_manifest
from benchharness.encoders.methods.method import LossOutput, TrainingMethod
from benchharness.encoders.methods.optim import LegacyAdamW, clip_gradients
from benchharness.encoders.methods.resume import (
    MODEL_DIR,
    load_checkpoint,
    prepare_out,
    remove_checkpoint,
    rng_state,
    save_checkpoint,
    save_encoder,
)
from benchharness.encoders.methods.train_config import TrainConfig
from benchharness.encoders.sentence_transformers_format import EXPORTABLE, save_as_sentence_transformer

logger = logging.getLogger(__name__)

#: a dev evaluation: the encoder being trained -> its score, higher is better
DevScore = Callable[[nn.Module], float]


@dataclass
class TrainResult:
    out: Path
    steps: int
    completed: bool  # False when stopped by ``stop_after`` (resumable)
    best_step: int | None
    best_dev: float | None
    manifest: RunManifest | None  # None on the ranks > 0 of a data-parallel run (rank 0 writes it)


def to_device(batch: Any, device: torch.device) -> Any:
    """Move tensors in nested dicts/lists/tuples to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    if hasattr(batch, "to"):  # transformers BatchEncoding
        return batch.to(device)
    return batch


def no_decay(name: str) -> bool:
    """Biases and LayerNorm weights are not weight-decayed (BERT/SimCSE/ConSERT convention)."""
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def make_optimizer(module: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters in two groups (with and without weight decay), as
    ``config.optimizer`` says: ``torch-adamw`` or ``adamw-legacy`` (:class:`LegacyAdamW`, with
    ``config.correct_bias``)."""
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in params if not no_decay(n)], "weight_decay": config.weight_decay},
        {"params": [p for n, p in params if no_decay(n)], "weight_decay": 0.0},
    ]
    if config.optimizer == "adamw-legacy":
        return LegacyAdamW(groups, lr=config.lr, eps=config.adam_eps, correct_bias=config.correct_bias)
    return torch.optim.AdamW(groups, lr=config.lr, eps=config.adam_eps)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup from 0 over ``warmup`` steps, then linear decay to 0 at ``total``
    (transformers' ``get_linear_schedule_with_warmup``, which SimCSE and ConSERT use)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def batch_order(n: int, batch_size: int, drop_last: bool, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of one epoch: a permutation seeded by (seed, epoch), so resumption recomputes it."""
    gen = torch.Generator().manual_seed(seed * 1000 + epoch)
    perm = torch.randperm(n, generator=gen).numpy()
    stop = (n // batch_size) * batch_size if drop_last else n
    return [perm[i : i + batch_size] for i in range(0, stop, batch_size)]


def total_steps(n_examples: int, config: TrainConfig) -> int:
    per_epoch = n_examples // config.batch_size if config.drop_last else math.ceil(n_examples / config.batch_size)
    if per_epoch < 1:
        raise InvalidInputError(f"{n_examples} training examples give no full batch of {config.batch_size}")
    last = n_examples % config.batch_size
    if not config.drop_last and 0 < last < config.nproc:
        raise InvalidInputError(
            f"the last batch of {n_examples} examples holds {last}, fewer than one per process "
            f"(--nproc {config.nproc}); choose another --batch-size or --nproc"
        )
    return config.max_steps if config.max_steps is not None else per_epoch * config.epochs


def local_loss(
    model: nn.Module,
    method: TrainingMethod,
    chunk: list[Any],
    n_global: int,
    device: torch.device,
    precision: str,
    ctx: data_parallel.Context | None,
) -> tuple[LossOutput, Any, torch.Tensor]:
    """One process's forward on its rows ``chunk`` of a global batch of ``n_global`` examples:
    collate, run ``model`` (``method``, in DDP when data-parallel), and the loss to back-propagate.

    Each rank's loss is a mean over its own rows, which DDP's gradient average turns into the mean
    over the global batch when the slices are equal; a last partial batch split unevenly is
    weighted by each slice's size (``data_parallel.example_share``). Returns the output, the batch
    and that loss."""
    batch = to_device(method.collate(chunk), device)
    with autocast(device, precision):
        output = model(batch)
    loss = output.loss
    if ctx is not None and len(chunk) * ctx.world_size != n_global:
        loss = loss * data_parallel.example_share(len(chunk), n_global, ctx)
    return output, batch, loss


def _log(path: Path, record: dict[str, Any]) -> None:
    """Append one line of the metrics log; a full disk is named as this file's (the write that fails
    may be the flush at ``close``, whose error carries no file name)."""
    try:
        with path.open("a", encoding="utf8") as fh:
            fh.write(json.dumps(record) + "\n")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


@kept_threads()  # config.threads is this run's: a library call that trains leaves the count as found
def train(
    method: TrainingMethod,
    examples: Sequence[Any],
    config: TrainConfig,
    *,
    data: dict[str, Any],
    base_source: hub.ModelSource | None = None,
    dev: DevScore | None = None,
    dev_task: str | None = None,
) -> TrainResult:
    """Train ``method`` on ``examples`` (any indexable sequence) as ``config`` says and write the
    output folder.

    ``data`` describes the training data for the manifest (name, size, description...). ``dev``
    scores the encoder at evaluations (``config.eval_every``, step 0 when ``eval_at_start``) and,
    without periodic evaluation, once after training; ``dev_task`` names what it measures, for
    the manifest. A config that asks for dev evaluation without a ``dev`` is refused. Rerunning
    with the same ``out`` resumes from the checkpoint there (the configuration must match, except
    for the settings in ``resume.RESUMABLE_CHANGES``).
    """
    if dev is None and config.wants_dev:
        raise InvalidInputError(
            "this run evaluates on a dev set (eval_every or eval_at_start is set) but no dev "
            "evaluator was given; train through `benchharness train`, or pass dev=..."
        )
    code_version()  # pin the version of the code now running (see code_version)
    if config.threads:
        torch.set_num_threads(config.threads)
    ctx = data_parallel.start(config.nproc, config.negatives, pick_device(config.device))
    main = ctx is None or ctx.rank == 0  # the process that evaluates and writes
    device = ctx.device if ctx is not None else pick_device(config.device)
    precision = check_precision(config.precision, device)
    pooling = config.eval_pooling or method.eval_pooling
    if ctx is not None and method.in_batch_negatives and not config.drop_last and len(examples) % config.batch_size:
        raise InvalidInputError(
            f"{method.method_name} gathers in-batch negatives, which needs equal slices of every "
            "batch: a data-parallel run of it keeps full batches only (drop_last)"
        )
    resume_from = data_parallel.from_main(lambda: prepare_out(config), ctx)
    out = config.out
    metrics_path = out / "metrics.jsonl"
    steps = total_steps(len(examples), config)
    warmup = math.ceil(config.warmup_ratio * steps)  # ConSERT rounds up; 0 stays 0
    checkpoint_every = config.checkpoint_every or config.eval_every or 500

    seed_everything(data_parallel.rank_seed(config.seed, ctx))
    method.to(device)
    method.train()
    optimizer = make_optimizer(method, config)
    scheduler = linear_schedule(optimizer, warmup, steps)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    state: dict[str, Any] = {
        "step": 0,
        "epoch": 0,
        "batch_in_epoch": 0,
        "dev_curve": [],
        "best_step": None,
        "best_dev": None,
        "bad_evals": 0,
        "train_seconds": 0.0,
        "sentences": 0,
        "stopped_early": False,
    }
    if resume_from is not None:
        state = load_checkpoint(
            resume_from, config, method, optimizer, scheduler, scaler, ctx.rank if ctx is not None else 0
        )
        if main:
            logger.info("resuming %s at step %d/%d", out, state["step"], steps)
    # DDP copies rank 0's parameters to every rank here (the same ones: same base, seed and checkpoint)
    model = data_parallel.wrap(method, ctx) if ctx is not None else method

    def evaluate(step: int) -> bool:
        """Record a dev score; save the encoder if it is the best so far. True = stop early. Rank 0
        evaluates; the others wait for its bookkeeping, so that every rank stops at the same step."""
        if main:
            assert dev is not None  # evaluate() is only called with a dev scorer (checked above)
            score = dev(method.encoder)
            state["dev_curve"].append([step, score])
            record = {"step": step, "dev_spearman": score}
            if step > 0:  # the untrained base (step 0) is recorded, never selected
                if state["best_dev"] is None or score > state["best_dev"]:
                    state["best_dev"], state["best_step"], state["bad_evals"] = score, step, 0
                    save_encoder(method, out)
                    record["best"] = True
                else:
                    state["bad_evals"] += 1
            _log(metrics_path, record)
            bar.write(
                f"step {step}: STS-B dev spearman {score:.2f} (best {state['best_dev'] or float('nan'):.2f} "
                f"at step {state['best_step']})"
            )
        state.update(data_parallel.broadcast({k: state[k] for k in EVALUATION_STATE}, ctx))
        return config.patience is not None and state["bad_evals"] >= config.patience

    def checkpoint() -> None:
        """Rank 0 saves, with every rank's random generators."""
        rngs = data_parallel.gather_objects(rng_state(), ctx) if ctx is not None else None
        if main:
            save_checkpoint(out, config, method, optimizer, scheduler, scaler, state, rngs)

    bar = tqdm(
        total=steps,
        initial=state["step"],
        desc=f"train {method.method_name}",
        unit="step",
        disable=not (shown() and main),
        dynamic_ncols=True,
    )
    if state["step"] == 0 and config.eval_at_start and dev is not None and not state["dev_curve"]:
        evaluate(0)
    window: dict[str, list[float]] = {}
    halted = False
    while state["step"] < steps and not state["stopped_early"]:
        batches = batch_order(len(examples), config.batch_size, config.drop_last, config.seed, state["epoch"])
        while state["batch_in_epoch"] < len(batches) and state["step"] < steps:
            idx = batches[state["batch_in_epoch"]]
            rows = data_parallel.local_rows(idx, ctx) if ctx is not None else idx
            chunk = [examples[int(i)] for i in rows]
            t0 = time.perf_counter()
            output, batch, loss = local_loss(model, method, chunk, len(idx), device, precision, ctx)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if config.grad_clip is not None:
                scaler.unscale_(optimizer)
                clip_gradients(method.parameters(), config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            state["train_seconds"] += time.perf_counter() - t0
            logs = {"loss": float(loss.detach()), **{k: float(v) for k, v in output.logs.items()}}
            sentences = method.size(batch, chunk)
            if ctx is not None:  # the global batch's: the mean of the ranks' losses, every rank's sentences
                *sums, summed = data_parallel.sum_over_ranks([*logs.values(), sentences], ctx)
                sentences = int(summed)
                logs = {k: v / ctx.world_size for k, v in zip(logs, sums)}
            state["sentences"] += int(sentences)
            state["step"] += 1
            state["batch_in_epoch"] += 1
            step = state["step"]
            if not math.isfinite(logs["loss"]):
                raise DivergedError(f"loss is {logs['loss']} at step {step}; lower --lr or use fp32")
            for k, v in logs.items():
                window.setdefault(k, []).append(v)
            bar.update(1)
            bar.set_postfix(loss=f"{logs['loss']:.4f}")
            if main and (step % config.log_every == 0 or step == steps):
                _log(
                    metrics_path,
                    {
                        "step": step,
                        "epoch": state["epoch"],
                        "lr": scheduler.get_last_lr()[0],
                        **{k: float(np.mean(v)) for k, v in window.items()},
                        "sentences_per_second": state["sentences"] / max(state["train_seconds"], 1e-9),
                    },
                )
            if step % config.log_every == 0 or step == steps:
                window = {}
            if config.eval_every is not None and dev is not None and (step % config.eval_every == 0 or step == steps):
                stop = evaluate(step)  # True once dev has not improved in ``patience`` evaluations
                if stop:
                    state["stopped_early"] = True
                    if main:
                        bar.write(f"early stop: no dev improvement in {config.patience} evaluations")
                    break
            if step % checkpoint_every == 0 and step < steps:
                checkpoint()
            if config.stop_after is not None and step >= config.stop_after and step < steps:
                halted = True
                break
        if halted:
            break
        if state["batch_in_epoch"] >= len(batches):
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
    bar.close()
    if halted:
        checkpoint()
        data_parallel.barrier(ctx)
        if main:
            logger.info("stopped after step %d; rerun the same command to resume", state["step"])
        return TrainResult(out, state["step"], False, state["best_step"], state["best_dev"], None)

    manifest = data_parallel.from_main(
        lambda: finish(
            method, config, state, data, base_source, dev, dev_task, pooling, steps, warmup, device, precision
        ),
        ctx,
    )
    return TrainResult(out, state["step"], True, state["best_step"], state["best_dev"], manifest if main else None)


#: the loop state that an evaluation changes, which rank 0 sends to the other ranks
EVALUATION_STATE = ("dev_curve", "best_step", "best_dev", "bad_evals")


def finish(
    method: TrainingMethod,
    config: TrainConfig,
    state: dict[str, Any],
    data: dict[str, Any],
    base_source: hub.ModelSource | None,
    dev: DevScore | None,
    dev_task: str | None,
    pooling: str,
    steps: int,
    warmup: int,
    device: torch.device,
    precision: str,
) -> RunManifest:
    """The end of a completed run (rank 0's): the final encoder when there was no dev selection,
    the sentence-transformers files, the manifest; the checkpoint is removed unless kept."""
    out = config.out
    if config.eval_every is None or dev is None:
        save_encoder(method, out)  # no dev selection: the final weights are the encoder
        if dev is not None:
            state["dev_curve"].append([state["step"], dev(method.encoder)])
            _log(out / "metrics.jsonl", {"step": state["step"], "dev_spearman": state["dev_curve"][-1][1]})
    if state["step"] == 0 or not (out / MODEL_DIR).is_dir():  # a manifest makes the folder an encoder
        raise RuntimeError(
            f"{out}: the run trained {state['step']} steps and saved no model in {out / MODEL_DIR}; "
            "it is not registered (no manifest.json written)"
        )
    if pooling in EXPORTABLE:  # loadable by SentenceTransformer(path), pooled as evaluated
        save_as_sentence_transformer(out / MODEL_DIR, {"pooling": pooling, "max_length": config.eval_max_length})
    manifest = build_manifest(
        method,
        config,
        state,
        data,
        base_source or hub.resolve(base_folder(config.base)),
        pooling,
        steps,
        warmup,
        device,
        precision,
        dev_task,
    )
    write_manifest(out, manifest)
    if not config.keep_checkpoint:
        remove_checkpoint(out)
    return manifest
