"""The training loop every method shares (ConSERT, SimCSE, PaSeR, DefSent+).

What it does: deterministic seeding and data order (a seeded permutation per epoch, recomputed on
resumption); AdamW (weight decay off for biases and LayerNorm; ``options.optimizer`` picks
``torch.optim.AdamW`` or the legacy ``transformers.AdamW`` of the methods' official code,
``optim.py``) with linear warmup and linear decay; device and precision from
``benchharness.core.devices`` (CUDA and fp16 autocast + GradScaler, or bf16); optional gradient
clipping (global norm, before the optimizer step); periodic dev evaluation through a callback,
best-checkpoint selection and early stopping (``patience`` evaluations without improvement); tqdm
progress; and the run's outputs (``outputs.py``): an output folder with its metrics log, resumable
checkpoints (``resume.py``), the selected encoder and the manifest, or, without one, all of it in
memory, the selected weights put back into the module.

Data-parallel runs (``options.nproc`` > 1, started by torchrun; ``data_parallel.py``): each process
trains on its contiguous slice of every global batch, DDP averages the gradients; rank 0 alone
evaluates and writes (metrics, checkpoints, model, manifest) and broadcasts its decisions (early
stopping, the best step), so that every rank takes the same steps.

The loop knows no evaluation task: the caller hands it ``dev``, a function from the encoder being
trained to a score (higher is better); training passes the harness's STS-B dev evaluator
(``benchharness.training.dev_eval``), so a dev score is the one the harness reproduces.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from benchharness.core.cpu_share import kept_threads
from benchharness.core.devices import autocast, check_precision, pick_device
from benchharness.core.errors import DivergedError, InvalidInputError
from benchharness.core.manifests import MODEL, RunManifest
from benchharness.core.seeding import seed_everything
from benchharness.encoders import hub
from benchharness.training import data_parallel
from benchharness.training.manifest import build_manifest, code_version
from benchharness.training.matryoshka import Matryoshka
from benchharness.training.method import LossOutput, TrainedRun, TrainingContext, TrainingMethod
from benchharness.training.optim import LegacyAdamW, clip_gradients
from benchharness.training.options import TrainingOptions
from benchharness.training.outputs import FolderOutput, MemoryOutput
from benchharness.training.resume import Interrupted, rng_state

logger = logging.getLogger(__name__)

#: a dev evaluation: the encoder being trained -> its score, higher is better
DevScore = Callable[[nn.Module], float]


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


def make_optimizer(module: nn.Module, config: TrainingOptions) -> torch.optim.Optimizer:
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


def total_steps(n_examples: int, config: TrainingOptions) -> int:
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


@dataclass
class Position:
    """How far a run has come, kept outside the loop so that a Ctrl-C can say it: the steps done
    (None until a resumed run's checkpoint is read), the step of the checkpoint in its folder
    (None: none yet), how often one is written, and the progress bar to close."""

    step: int | None = None
    checkpoint: int | None = None
    every: int = 0
    bar: Any = None


@kept_threads()  # context.threads is this run's: a library call that trains leaves the count as found
def run_loop(
    method: TrainingMethod,
    examples: Sequence[Any],
    options: TrainingOptions,
    context: TrainingContext,
    *,
    data: dict[str, Any],
    base_source: hub.ModelSource | None = None,
    dev: DevScore | None = None,
    dev_task: str | None = None,
) -> TrainedRun:
    """Train ``method`` on ``examples`` (any indexable sequence) as ``options`` say, into
    ``context.out`` (or in memory when it is None), and return the trained run.

    ``data`` describes the training data for the manifest (name, size, description...), and
    ``base_source`` where the base came from (default: ``context.base`` resolved). ``dev``
    scores the encoder at evaluations (``options.eval_every``, step 0 when ``eval_at_start``) and,
    without periodic evaluation, once after training; ``dev_task`` names what it measures, for
    the manifest. Options that ask for dev evaluation without a ``dev`` are refused. Rerunning
    with the same ``out`` resumes from the checkpoint there (the settings must match, except
    for those in ``resume.RESUMABLE_CHANGES``). A Ctrl-C once training has begun raises
    :class:`~benchharness.training.resume.Interrupted`, which says what the folder keeps.
    """
    position = Position()
    try:
        return _run_loop(method, examples, options, context, data, base_source, dev, dev_task, position)
    except KeyboardInterrupt:
        if position.bar is not None:
            position.bar.close()  # the message that follows starts on a line of its own
        if position.step is None:
            raise
        raise Interrupted(context.out, position.step, position.checkpoint, position.every) from None


def _run_loop(
    method: TrainingMethod,
    examples: Sequence[Any],
    options: TrainingOptions,
    context: TrainingContext,
    data: dict[str, Any],
    base_source: hub.ModelSource | None,
    dev: DevScore | None,
    dev_task: str | None,
    position: Position,
) -> TrainedRun:
    """:func:`run_loop`'s work, which records in ``position`` how far it has come."""
    if dev is None and options.wants_dev:
        raise InvalidInputError(
            "this run evaluates on a dev set (eval_every or eval_at_start is set) but no dev "
            "evaluator was given; train through `benchharness train`, or pass dev=..."
        )
    if context.out is None and context.stop_after is not None:
        raise InvalidInputError("stop_after pauses a run to resume it from its folder: give an output folder (out=)")
    # the module whose forward gives the step's loss: the method's own, or its Matryoshka sum (whose
    # sizes are checked against the encoder's width here, before anything is written)
    scored: nn.Module = method
    if options.matryoshka_dims is not None:
        scored = Matryoshka(method, options.matryoshka_dims, options.matryoshka_weights)
    code_version()  # pin the version of the code now running (see code_version)
    if context.threads:
        torch.set_num_threads(context.threads)
    ctx = data_parallel.start(options.nproc, options.negatives, pick_device(context.device))
    main = ctx is None or ctx.rank == 0  # the process that evaluates and writes
    device = ctx.device if ctx is not None else pick_device(context.device)
    precision = check_precision(options.precision, device)
    pooling = options.eval_pooling or method.eval_pooling
    if ctx is not None and method.in_batch_negatives and not options.drop_last and len(examples) % options.batch_size:
        raise InvalidInputError(
            f"{method.method_name} gathers in-batch negatives, which needs equal slices of every "
            "batch: a data-parallel run of it keeps full batches only (drop_last)"
        )
    output = MemoryOutput() if context.out is None or not main else FolderOutput(context.out)
    resume_from = data_parallel.from_main(lambda: output.prepare(context.overwrite), ctx)
    record = {**options.shared(), **context.record()}
    steps = total_steps(len(examples), options)
    warmup = math.ceil(options.warmup_ratio * steps)  # ConSERT rounds up; 0 stays 0
    checkpoint_every = options.checkpoint_every or options.eval_every or 500

    seed_everything(data_parallel.rank_seed(options.seed, ctx))
    method.to(device)
    method.train()
    optimizer = make_optimizer(method, options)
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
        from benchharness.training.resume import load_checkpoint

        state = load_checkpoint(
            resume_from, record, method, optimizer, scheduler, scaler, ctx.rank if ctx is not None else 0
        )
        if main:
            logger.info("resuming %s at step %d/%d", context.out, state["step"], steps)
        position.checkpoint = state["step"]
    position.step, position.every = state["step"], checkpoint_every
    # DDP copies rank 0's parameters to every rank here (the same ones: same base, seed and checkpoint)
    model = data_parallel.wrap(scored, ctx) if ctx is not None else scored

    def evaluate(step: int) -> bool:
        """Record a dev score; keep the encoder if it is the best so far. True = stop early. Rank 0
        evaluates; the others wait for its bookkeeping, so that every rank stops at the same step."""
        if main:
            assert dev is not None  # evaluate() is only called with a dev scorer (checked above)
            score = dev(method.encoder)
            state["dev_curve"].append([step, score])
            line = {"step": step, "dev_spearman": score}
            if step > 0:  # the untrained base (step 0) is recorded, never selected
                if state["best_dev"] is None or score > state["best_dev"]:
                    state["best_dev"], state["best_step"], state["bad_evals"] = score, step, 0
                    output.keep_best(method)
                    line["best"] = True
                else:
                    state["bad_evals"] += 1
            output.log(line)
            if step == 0:
                logger.info("step 0: %s spearman %.2f (the base model, before training)", dev_task, score)
            else:
                logger.info(
                    "step %d: %s spearman %.2f (best %.2f at step %d)",
                    step,
                    dev_task,
                    score,
                    state["best_dev"],
                    state["best_step"],
                )
        state.update(data_parallel.broadcast({k: state[k] for k in EVALUATION_STATE}, ctx))
        return options.patience is not None and state["bad_evals"] >= options.patience

    def checkpoint() -> None:
        """Rank 0 saves, with every rank's random generators."""
        rngs = data_parallel.gather_objects(rng_state(), ctx) if ctx is not None else None
        if main:
            output.checkpoint(record, method, optimizer, scheduler, scaler, state, rngs)
        if context.out is not None:
            position.checkpoint = state["step"]

    bar = tqdm(
        total=steps,
        initial=state["step"],
        desc=f"train {method.method_name}",
        unit="step",
        disable=not (context.progress and main),
        dynamic_ncols=True,
    )
    position.bar = bar
    if state["step"] == 0 and options.eval_at_start and dev is not None and not state["dev_curve"]:
        evaluate(0)
    window: dict[str, list[float]] = {}
    halted = False
    while state["step"] < steps and not state["stopped_early"]:
        batches = batch_order(len(examples), options.batch_size, options.drop_last, options.seed, state["epoch"])
        while state["batch_in_epoch"] < len(batches) and state["step"] < steps:
            idx = batches[state["batch_in_epoch"]]
            rows = data_parallel.local_rows(idx, ctx) if ctx is not None else idx
            chunk = [examples[int(i)] for i in rows]
            t0 = time.perf_counter()
            loss_output, batch, loss = local_loss(model, method, chunk, len(idx), device, precision, ctx)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if options.grad_clip is not None:
                scaler.unscale_(optimizer)
                clip_gradients(method.parameters(), options.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            state["train_seconds"] += time.perf_counter() - t0
            logs = {"loss": float(loss.detach()), **{k: float(v) for k, v in loss_output.logs.items()}}
            sentences = method.size(batch, chunk)
            if ctx is not None:  # the global batch's: the mean of the ranks' losses, every rank's sentences
                *sums, summed = data_parallel.sum_over_ranks([*logs.values(), sentences], ctx)
                sentences = int(summed)
                logs = {k: v / ctx.world_size for k, v in zip(logs, sums)}
            state["sentences"] += int(sentences)
            state["step"] += 1
            state["batch_in_epoch"] += 1
            step = position.step = state["step"]
            if not math.isfinite(logs["loss"]):
                raise DivergedError(f"loss is {logs['loss']} at step {step}; lower --lr or use fp32")
            for k, v in logs.items():
                window.setdefault(k, []).append(v)
            bar.update(1)
            bar.set_postfix(loss=f"{logs['loss']:.4f}")
            if main and (step % options.log_every == 0 or step == steps):
                output.log(
                    {
                        "step": step,
                        "epoch": state["epoch"],
                        "lr": scheduler.get_last_lr()[0],
                        **{k: float(np.mean(v)) for k, v in window.items()},
                        "sentences_per_second": state["sentences"] / max(state["train_seconds"], 1e-9),
                    },
                )
            if step % options.log_every == 0 or step == steps:
                window = {}
            if options.eval_every is not None and dev is not None and (step % options.eval_every == 0 or step == steps):
                stop = evaluate(step)  # True once dev has not improved in ``patience`` evaluations
                if stop:
                    state["stopped_early"] = True
                    if main:
                        logger.info("early stop: no dev improvement in %d evaluations", options.patience)
                    break
            if step % checkpoint_every == 0 and step < steps:
                checkpoint()
            if context.stop_after is not None and step >= context.stop_after and step < steps:
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
        return TrainedRun(method.encoder, method.tokenizer, None, [], context.out, state["step"], False, None, None)

    def finish() -> tuple[RunManifest, list[dict[str, Any]]]:
        return _finish(
            method,
            options,
            context,
            output,
            state,
            data,
            base_source,
            dev,
            dev_task,
            pooling,
            steps,
            warmup,
            device,
            precision,
        )

    manifest, metrics = data_parallel.from_main(finish, ctx)
    return TrainedRun(
        method.encoder,
        method.tokenizer,
        manifest if main else None,
        metrics if main else [],
        context.out,
        state["step"],
        True,
        state["best_step"],
        state["best_dev"],
    )


#: the loop state that an evaluation changes, which rank 0 sends to the other ranks
EVALUATION_STATE = ("dev_curve", "best_step", "best_dev", "bad_evals")


def _finish(
    method: TrainingMethod,
    options: TrainingOptions,
    context: TrainingContext,
    output: MemoryOutput,
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
) -> tuple[RunManifest, list[dict[str, Any]]]:
    """The end of a completed run (rank 0's): the final encoder when there was no dev selection,
    else the selected weights (back in the module for a run in memory); the manifest, and the run's
    files when it has a folder (the checkpoint removed unless kept). Returns the manifest and the
    metrics log."""
    if options.eval_every is None or dev is None:
        output.save_final(method)  # no dev selection: the final weights are the encoder
        if dev is not None:
            state["dev_curve"].append([state["step"], dev(method.encoder)])
            output.log({"step": state["step"], "dev_spearman": state["dev_curve"][-1][1]})
    else:
        output.restore_best(method)
    if state["step"] == 0 or (context.out is not None and not (context.out / MODEL).is_dir()):
        where = "in memory" if context.out is None else f"in {context.out / MODEL}"
        raise RuntimeError(
            f"{context.out or 'the run'}: the run trained {state['step']} steps and saved no model {where}; "
            "it is not registered (no manifest.json written)"
        )
    source = base_source or hub.resolve(context.base, context.hub)
    manifest = build_manifest(
        method, options, context, state, data, source, pooling, steps, warmup, device, precision, dev_task
    )
    return manifest, output.finish(method, manifest, context.keep_checkpoint)
