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

The loop knows no evaluation task: the settings hand it ``dev``, a factory of a function from the
encoder being trained to a score (higher is better); training passes the harness's STS-B dev
evaluator (``benchharness.training.dev_eval``), so a dev score is the one the harness reproduces.
Its position is one typed value, :class:`LoopState`, which the checkpoint saves and the manifest
reads.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from benchharness.core.cpu_share import kept_threads
from benchharness.core.devices import autocast, check_precision, pick_device
from benchharness.core.errors import DivergedError, InvalidInputError
from benchharness.core.manifests import RunManifest, Selection, TrainingStats
from benchharness.core.provenance import now
from benchharness.core.resources import peak_memory
from benchharness.core.seeding import seed_everything
from benchharness.encoders import hub
from benchharness.training import data_parallel, matryoshka
from benchharness.training.manifest import SCHEMA_VERSION, code_version
from benchharness.training.matryoshka import Matryoshka
from benchharness.training.method import LossOutput, TrainedRun, TrainingMethod
from benchharness.training.optim import LegacyAdamW, clip_gradients
from benchharness.training.options import TrainingOptions
from benchharness.training.outputs import FolderOutput, MemoryOutput
from benchharness.training.plan import Plan
from benchharness.training.resume import Interrupted, rng_state
from benchharness.training.settings import TrainSettings

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
class LoopState:
    """Where a run is: its position (step, epoch, batch within the epoch), its dev curve and the best
    step so far, the evaluations since the last improvement, the time and sentences it took, and
    whether it stopped early. A checkpoint saves it as a plain mapping (:meth:`saved`)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    dev_curve: list[list[float]] = field(default_factory=list)
    best_step: int | None = None
    best_dev: float | None = None
    bad_evals: int = 0
    train_seconds: float = 0.0
    sentences: int = 0
    stopped_early: bool = False

    def saved(self) -> dict[str, Any]:
        return asdict(self)

    def evaluation(self) -> dict[str, Any]:
        """What an evaluation changes, which rank 0 sends to the other ranks."""
        return {k: getattr(self, k) for k in EVALUATION_STATE}

    def take(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)


#: the loop state that an evaluation changes
EVALUATION_STATE = ("dev_curve", "best_step", "best_dev", "bad_evals")


@dataclass
class Position:
    """How far a run has come, kept outside the loop so that a Ctrl-C can say it: the steps done
    (None until a resumed run's checkpoint is read), the step of the checkpoint in its folder
    (None: none yet), how often one is written, and the progress bar to close."""

    step: int | None = None
    checkpoint: int | None = None
    every: int = 0
    bar: Any = None


@kept_threads()  # settings.threads is this run's: a library call that trains leaves the count as found
def run_loop(
    method: TrainingMethod,
    examples: Sequence[Any],
    options: TrainingOptions,
    settings: TrainSettings,
    plan: Plan,
    *,
    data: dict[str, Any],
    base_source: hub.ModelSource | None = None,
    dev: DevScore | None = None,
) -> TrainedRun:
    """Train ``method`` on ``examples`` (any indexable sequence) as ``options`` say, into
    ``plan.out`` (or in memory when it is None), and return the trained run.

    ``data`` describes the training data for the manifest (name, size, description...), and
    ``base_source`` where the base came from (default: ``plan.base`` resolved). The dev evaluation
    is the settings' (``settings.dev``), built when the options ask for one; ``dev`` stands for it
    (a function of the encoder, named by its ``task_name`` when it has one). It scores the encoder at
    evaluations (``options.eval_every``, step 0 when ``options.dev_at_start``) and, without periodic
    evaluation, once after training. Options that ask for dev evaluation without one are refused.
    Rerunning with the same ``out`` resumes from the checkpoint there (the settings must match, except
    for ``settings.RESUMABLE``). A Ctrl-C once training has begun raises
    :class:`~benchharness.training.resume.Interrupted`, which says what the folder keeps.
    """
    if dev is None and settings.dev is not None and options.wants_dev:
        dev = settings.dev(method, options, settings)
    position = Position()
    try:
        return _Run(method, examples, options, settings, plan, data, base_source, dev, position).train()
    except KeyboardInterrupt:
        if position.bar is not None:
            position.bar.close()  # the message that follows starts on a line of its own
        if position.step is None:
            raise
        raise Interrupted(plan.out, position.step, position.checkpoint, position.every) from None


@dataclass(eq=False)
class _Run:
    """One run of the loop: what it was given (``run_loop``'s arguments), what it set up (device,
    precision, optimizer, schedule, outputs) and where it is (:class:`LoopState`)."""

    method: TrainingMethod
    examples: Sequence[Any]
    options: TrainingOptions
    settings: TrainSettings
    plan: Plan
    data: dict[str, Any]
    base_source: hub.ModelSource | None
    dev: DevScore | None
    position: Position

    def __post_init__(self) -> None:
        method, options, settings, plan = self.method, self.options, self.settings, self.plan
        if self.dev is None and options.wants_dev:
            raise InvalidInputError(
                "this run evaluates on a dev set (eval_every or eval_at_start is set) but no dev "
                "evaluator was given; train through `benchharness train`, or pass dev=..."
            )
        if plan.out is None and settings.stop_after is not None:
            raise InvalidInputError(
                "stop_after pauses a run to resume it from its folder: give an output folder (out=)"
            )
        self.dev_task: str | None = getattr(self.dev, "task_name", None)
        # the module whose forward gives the step's loss: the method's own, or its Matryoshka sum (whose
        # sizes are checked against the encoder's width here, before anything is written)
        self.scored: nn.Module = method
        if options.matryoshka_dims is not None:
            self.scored = Matryoshka(method, options.matryoshka_dims, options.matryoshka_weights)
        code_version()  # pin the version of the code now running (see code_version)
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.ctx = ctx = data_parallel.start(options.nproc, options.negatives, pick_device(settings.device))
        self.main = ctx is None or ctx.rank == 0  # the process that evaluates and writes
        self.device = ctx.device if ctx is not None else pick_device(settings.device)
        self.precision = check_precision(options.precision, self.device)
        self.pooling = options.eval_pooling or method.eval_pooling
        if (
            ctx is not None
            and method.in_batch_negatives
            and not options.drop_last
            and len(self.examples) % options.batch_size
        ):
            raise InvalidInputError(
                f"{method.method_name} gathers in-batch negatives, which needs equal slices of every "
                "batch: a data-parallel run of it keeps full batches only (drop_last)"
            )
        self.output = MemoryOutput() if plan.out is None or not self.main else FolderOutput(plan.out)
        resume_from = data_parallel.from_main(lambda: self.output.prepare(settings.overwrite), ctx)
        self.record = {**options.shared(), **plan.record(settings)}
        self.steps = total_steps(len(self.examples), options)
        self.warmup = math.ceil(options.warmup_ratio * self.steps)  # ConSERT rounds up; 0 stays 0
        self.checkpoint_every = options.checkpoint_every or options.eval_every or 500

        seed_everything(data_parallel.rank_seed(options.seed, ctx))
        method.to(self.device)
        method.train()
        self.optimizer = make_optimizer(method, options)
        self.scheduler = linear_schedule(self.optimizer, self.warmup, self.steps)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.state = LoopState()
        if resume_from is not None:
            from benchharness.training.resume import load_checkpoint

            saved = load_checkpoint(
                resume_from,
                self.record,
                method,
                self.optimizer,
                self.scheduler,
                self.scaler,
                ctx.rank if ctx is not None else 0,
            )
            self.state = LoopState(**saved)
            if self.main:
                logger.info("resuming %s at step %d/%d", plan.out, self.state.step, self.steps)
            self.position.checkpoint = self.state.step
        self.position.step, self.position.every = self.state.step, self.checkpoint_every
        # DDP copies rank 0's parameters to every rank here (the same ones: same base, seed and checkpoint)
        self.model = data_parallel.wrap(self.scored, ctx) if ctx is not None else self.scored

    def evaluate(self, step: int) -> bool:
        """Record a dev score; keep the encoder if it is the best so far. True = stop early. Rank 0
        evaluates; the others wait for its bookkeeping, so that every rank stops at the same step."""
        state = self.state
        if self.main:
            assert self.dev is not None  # evaluate() is only called with a dev scorer (checked above)
            score = self.dev(self.method.encoder)
            state.dev_curve.append([step, score])
            line: dict[str, Any] = {"step": step, "dev_spearman": score}
            if step > 0:  # the untrained base (step 0) is recorded, never selected
                if state.best_dev is None or score > state.best_dev:
                    state.best_dev, state.best_step, state.bad_evals = score, step, 0
                    self.output.keep_best(self.method)
                    line["best"] = True
                else:
                    state.bad_evals += 1
            self.output.log(line)
            if step == 0:
                logger.info("step 0: %s spearman %.2f (the base model, before training)", self.dev_task, score)
            else:
                logger.info(
                    "step %d: %s spearman %.2f (best %.2f at step %d)",
                    step,
                    self.dev_task,
                    score,
                    state.best_dev,
                    state.best_step,
                )
        state.take(data_parallel.broadcast(state.evaluation(), self.ctx))
        return self.options.patience is not None and state.bad_evals >= self.options.patience

    def checkpoint(self) -> None:
        """Rank 0 saves, with every rank's random generators."""
        rngs = data_parallel.gather_objects(rng_state(), self.ctx) if self.ctx is not None else None
        if self.main:
            self.output.checkpoint(
                self.record, self.method, self.optimizer, self.scheduler, self.scaler, self.state.saved(), rngs
            )
        if self.plan.out is not None:
            self.position.checkpoint = self.state.step

    def step(self, idx: np.ndarray) -> dict[str, float]:
        """One optimizer step on the global batch ``idx`` (this rank's rows of it); the logged values."""
        options, ctx, method, state = self.options, self.ctx, self.method, self.state
        rows = data_parallel.local_rows(idx, ctx) if ctx is not None else idx
        chunk = [self.examples[int(i)] for i in rows]
        t0 = time.perf_counter()
        loss_output, batch, loss = local_loss(self.model, method, chunk, len(idx), self.device, self.precision, ctx)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if options.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            clip_gradients(method.parameters(), options.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        state.train_seconds += time.perf_counter() - t0
        logs = {"loss": float(loss.detach()), **{k: float(v) for k, v in loss_output.logs.items()}}
        sentences = method.size(batch, chunk)
        if ctx is not None:  # the global batch's: the mean of the ranks' losses, every rank's sentences
            *sums, summed = data_parallel.sum_over_ranks([*logs.values(), sentences], ctx)
            sentences = int(summed)
            logs = {k: v / ctx.world_size for k, v in zip(logs, sums)}
        state.sentences += int(sentences)
        state.step += 1
        state.batch_in_epoch += 1
        if not math.isfinite(logs["loss"]):
            raise DivergedError(f"loss is {logs['loss']} at step {state.step}; lower --lr or use fp32")
        return logs

    def train(self) -> TrainedRun:
        """The steps, the evaluations and checkpoints between them, then the end of the run."""
        options, settings, state, position, steps = self.options, self.settings, self.state, self.position, self.steps
        bar = tqdm(
            total=steps,
            initial=state.step,
            desc=f"train {self.method.method_name}",
            unit="step",
            disable=not (settings.progress and self.main),
            dynamic_ncols=True,
        )
        position.bar = bar
        if state.step == 0 and options.dev_at_start and self.dev is not None and not state.dev_curve:
            self.evaluate(0)
        window: dict[str, list[float]] = {}
        halted = False
        while state.step < steps and not state.stopped_early:
            batches = batch_order(len(self.examples), options.batch_size, options.drop_last, options.seed, state.epoch)
            while state.batch_in_epoch < len(batches) and state.step < steps:
                logs = self.step(batches[state.batch_in_epoch])
                step = position.step = state.step
                for k, v in logs.items():
                    window.setdefault(k, []).append(v)
                bar.update(1)
                bar.set_postfix(loss=f"{logs['loss']:.4f}")
                if step % options.log_every == 0 or step == steps:
                    if self.main:
                        self.output.log(
                            {
                                "step": step,
                                "epoch": state.epoch,
                                "lr": self.scheduler.get_last_lr()[0],
                                **{k: float(np.mean(v)) for k, v in window.items()},
                                "sentences_per_second": state.sentences / max(state.train_seconds, 1e-9),
                            },
                        )
                    window = {}
                due = options.eval_every is not None and (step % options.eval_every == 0 or step == steps)
                if due and self.dev is not None and self.evaluate(step):  # no dev improvement in ``patience``
                    state.stopped_early = True
                    if self.main:
                        logger.info("early stop: no dev improvement in %d evaluations", options.patience)
                    break
                if step % self.checkpoint_every == 0 and step < steps:
                    self.checkpoint()
                if settings.stop_after is not None and step >= settings.stop_after and step < steps:
                    halted = True
                    break
            if halted:
                break
            if state.batch_in_epoch >= len(batches):
                state.epoch += 1
                state.batch_in_epoch = 0
        bar.close()
        if halted:
            self.checkpoint()
            data_parallel.barrier(self.ctx)
            if self.main:
                logger.info("stopped after step %d; rerun the same command to resume", state.step)
            return TrainedRun(
                self.method.encoder, self.method.tokenizer, None, [], self.plan.out, state.step, False, None, None
            )
        manifest, metrics = data_parallel.from_main(self.finish, self.ctx)
        return TrainedRun(
            self.method.encoder,
            self.method.tokenizer,
            manifest if self.main else None,
            metrics if self.main else [],
            self.plan.out,
            state.step,
            True,
            state.best_step,
            state.best_dev,
        )

    def finish(self) -> tuple[RunManifest, list[dict[str, Any]]]:
        """The end of a completed run (rank 0's): the final encoder when there was no dev selection,
        else the selected weights (back in the module for a run in memory); the manifest, and the run's
        files when it has a folder (the checkpoint removed unless kept). Returns the manifest and the
        metrics log."""
        state, method, output, plan = self.state, self.method, self.output, self.plan
        if self.options.eval_every is None or self.dev is None:
            output.save_final(method)  # no dev selection: the final weights are the encoder
            if self.dev is not None:
                state.dev_curve.append([state.step, self.dev(method.encoder)])
                output.log({"step": state.step, "dev_spearman": state.dev_curve[-1][1]})
        else:
            output.restore_best(method)
        if state.step == 0 or not output.has_model():
            where = "in memory" if plan.out is None else f"in {plan.out}"
            raise RuntimeError(
                f"{plan.out or 'the run'}: the run trained {state.step} steps and saved no model {where}; "
                "it is not registered (no manifest.json written)"
            )
        manifest = self.manifest(self.base_source or hub.resolve(plan.base, self.settings.hub))
        return manifest, output.finish(method, manifest, self.settings.keep_checkpoint)

    def manifest(self, source: hub.ModelSource) -> RunManifest:
        """The manifest of the finished run, its recipe included when the plan has one. A run in
        memory has the name its plan gives, else its method's."""
        options, state, plan, method = self.options, self.state, self.plan, self.method
        hyper = {k: v for k, v in options.shared().items() if k != "data"}
        hyper.update({"total_steps": self.steps, "warmup_steps": self.warmup, **method.hyperparameters()})
        if options.matryoshka_dims is not None:
            hyper["matryoshka_loss"] = matryoshka.DESCRIPTION
        selection: Selection = (
            {
                "rule": "best STS-B dev spearman over evaluations after step 0",
                "best_step": state.best_step,
                "best_dev_spearman": state.best_dev,
            }
            if options.eval_every is not None and state.best_step is not None
            else {"rule": "final weights", "best_step": state.step}
        )
        memory = peak_memory(self.device)
        training: TrainingStats = {
            "steps": state.step,
            "epochs_completed": state.epoch,
            "batches_into_next_epoch": state.batch_in_epoch,
            "stopped_early": state.stopped_early,
            "train_seconds": round(state.train_seconds, 2),
            "sentences": state.sentences,
            "sentences_per_second": round(state.sentences / max(state.train_seconds, 1e-9), 2),
            "device": str(self.device),
            "precision": self.precision,
            "torch_threads": torch.get_num_threads(),
            "peak_rss_mib": round(memory["peak_rss_mib"], 1),
        }
        if "peak_cuda_mib" in memory:
            training["peak_cuda_mib"] = round(memory["peak_cuda_mib"], 1)
        manifest: RunManifest = {
            "schema_version": SCHEMA_VERSION,
            "name": plan.name or (plan.out.resolve().name if plan.out is not None else method.method_name),
            "method": method.method_name,
            "base_model": source.name,
            "base_revision": source.revision,
            "base_weights_sha256": source.weights_sha256,
            "data": {
                **self.data,
                "data_root": str(self.settings.data().root),
            },  # where the corpus and dev split were read
            "hyperparameters": hyper,
            "code_version": code_version(),
            "dev_task": self.dev_task if state.dev_curve else None,
            "dev_curve": state.dev_curve,
            "selection": selection,
            "training": training,
            "encoder": {"type": "hf", "model": ".", "pooling": self.pooling, "max_length": options.eval_max_length},
            "date": now(),  # when the weights were saved: an export's release date (mteb's ModelMeta)
        }
        recipe = plan.recipe_record()
        if recipe is not None:
            manifest["recipe"] = recipe
        return manifest
