"""The training loop every method shares (ConSERT, SimCSE, PaSeR, DefSent+).

API for a method (see ``consert.py`` and ``simcse.py`` for complete examples):

1. Subclass :class:`TrainingMethod` (an ``nn.Module``). Its constructor receives the base encoder
   (a transformers ``AutoModel``, kept as ``self.encoder``) and tokenizer; any training-only head
   (SimCSE's MLP, PaSeR's decoder, a classifier) is another submodule. The optimizer trains every
   parameter of the method; only ``self.encoder`` (and the tokenizer) is saved as the encoder.
   Construct it after ``seed_everything(config.seed)`` so that randomly initialised heads are
   reproducible (``train`` seeds again before the first step). Implement

   - ``collate(examples) -> batch``: tokenize a list of training examples (CPU tensors in a dict,
     or any structure :func:`to_device` can move);
   - ``forward(batch) -> LossOutput``: the loss, plus floats to log;
   - ``eval_pooling`` (class attribute or property): the pooling (``encoders.pooling.POOLINGS``)
     used at dev evaluation and written into the manifest;
   - optionally ``hyperparameters() -> dict`` (method-specific settings for the manifest) and
     ``size(batch) -> int`` (sentences in a batch, for throughput; default ``len(examples)``).

2. Build a :class:`TrainConfig` (``config_from_args`` turns the shared CLI flags of
   :func:`add_training_arguments` plus a preset into one) and call
   :func:`train(method, examples, config, data=...)`. ``examples`` is any sequence (sentences,
   NLI triples, dictionary entries); the loop only indexes it.

What the loop does: deterministic seeding and data order (a seeded permutation per epoch); AdamW
(weight decay off for biases and LayerNorm) with linear warmup and linear decay; device and
precision from ``benchharness.devices`` (CUDA and fp16 autocast + GradScaler, or bf16, when
present); optional gradient clipping; periodic STS-B dev evaluation with the encoder exactly as
the harness will run it (same ``pool`` function), best-checkpoint selection and early stopping
(``patience`` evaluations without improvement); tqdm progress; ``metrics.jsonl``; a resumable
checkpoint (method state incl. heads, optimizer, scheduler, scaler, RNG states, step and data
position) under ``<out>/checkpoint/``; and the output folder::

    <out>/model/          encoder weights + tokenizer (save_pretrained), training heads excluded
    <out>/manifest.json   name, method, base model + revision, data, hyper-parameters, code
                          version, dev curve, training statistics, and the encoder spec
                          {"type": "hf", "model": "model", "pooling": ...} the registry reads
    <out>/metrics.jsonl   one JSON object per logged step / evaluation

DefSent+-style runs (one epoch, no warmup, clip 1.0, no dev selection, several rounds restarting
from the original checkpoint): ``TrainConfig(epochs=1, warmup_ratio=0, grad_clip=1.0,
eval_every=None)``, and one :func:`train` call per round with a fresh :func:`load_base` model and
its own ``out`` folder.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from benchharness.devices import PRECISIONS, autocast, check_precision, pick_device
from encoders import hub
from encoders.pooling import POOLINGS, needs_hidden_states, pool

CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_FILE = "state.pt"
DEV_TASK = "STSBenchmark-dev"

#: settings that may change between a run and its resumption without changing its result
RESUMABLE_CHANGES = ("device", "stop_after", "threads", "progress", "overwrite", "out")


@dataclass
class TrainConfig:
    """Every setting of a training run; all of it is recorded in the manifest."""

    base: str
    out: Path
    data: str = "sts-unlabeled"
    name: str | None = None  # registry name written into the manifest; default: out folder name
    max_length: int = 64  # tokens per training sentence
    batch_size: int = 64
    lr: float = 3e-5
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    epochs: int = 1
    max_steps: int | None = None  # overrides epochs when set (epochs continue until it is reached)
    warmup_ratio: float = 0.1  # linear warmup over this fraction of the steps, then linear decay
    grad_clip: float | None = None  # max global grad norm; None = no clipping
    drop_last: bool = True  # contrastive losses want full batches (constant number of negatives)
    limit: int | None = None  # use only the first N examples (after de-duplication, before shuffling)
    eval_every: int | None = 200  # steps between STS-B dev evaluations; None = no dev selection
    eval_at_start: bool = True  # record the base model's dev score as step 0 (never selected)
    patience: int | None = None  # stop after this many evaluations without improvement
    eval_pooling: str | None = None  # None: the method's own
    eval_max_length: int = 512  # truncation at evaluation; written into the manifest spec
    eval_batch_size: int = 128
    checkpoint_every: int | None = None  # default: at every evaluation, else every 500 steps
    keep_checkpoint: bool = False  # keep <out>/checkpoint after a completed run
    log_every: int = 10
    seed: int = 42
    device: str | None = None
    precision: str = "fp32"  # fp16/bf16 need CUDA (autocast; GradScaler for fp16)
    threads: int | None = None  # torch CPU threads
    stop_after: int | None = None  # end this invocation after this step, resumable (time-boxing)
    overwrite: bool = False  # discard an existing finished run or checkpoint in ``out``
    progress: bool = True

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if self.eval_pooling is not None and self.eval_pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {self.eval_pooling!r}; choose one of {', '.join(POOLINGS)}")
        for key in ("batch_size", "max_length", "epochs"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass
class LossOutput:
    """What a method's ``forward`` returns: the loss to minimise and scalars worth logging."""

    loss: torch.Tensor
    logs: dict[str, float] = field(default_factory=dict)


class TrainingMethod(nn.Module):
    """Base class of a method's trainable module; see the module docstring for the contract."""

    #: method name, as in ``METHODS`` and the manifest
    method_name: str = ""
    #: pooling at evaluation (and in the manifest)
    eval_pooling: str = "avg"

    def __init__(self, encoder: nn.Module, tokenizer) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer

    def collate(self, examples: list[Any]) -> Any:
        raise NotImplementedError

    def forward(self, batch: Any) -> LossOutput:  # noqa: D401 - nn.Module protocol
        raise NotImplementedError

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    def size(self, batch: Any, examples: list[Any]) -> int:
        """Sentences processed for this batch (throughput); views are not counted twice."""
        return len(examples)


@dataclass
class TrainResult:
    out: Path
    steps: int
    completed: bool  # False when stopped by ``stop_after`` (resumable)
    best_step: int | None
    best_dev: float | None
    manifest: dict[str, Any] | None


# ----------------------------------------------------------------------------------------------
# building blocks


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) so that a run is reproducible."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def base_folder(base: str) -> str:
    """A trained run folder (holding ``manifest.json``) stands for its ``model/`` subfolder, so a
    run can continue another (ConSERT's sup-unsup); anything else is a hub id or model folder."""
    folder = Path(base).expanduser()
    if (folder / "manifest.json").is_file() and (folder / "model").is_dir():
        return str(folder / "model")
    return base


def load_base(base: str) -> tuple[nn.Module, Any, hub.ModelSource]:
    """The base encoder (``AutoModel``), its tokenizer and where they came from."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    source = hub.resolve(base_folder(base))
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # a pooler-less checkpoint (MiniLM-L3) warns; pooler unused
    try:
        model = AutoModel.from_pretrained(str(source.path))
    finally:
        hf_logging.set_verbosity(verbosity)
    tokenizer = AutoTokenizer.from_pretrained(str(source.path))
    return model, tokenizer, source


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
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in params if not no_decay(n)], "weight_decay": config.weight_decay},
        {"params": [p for n, p in params if no_decay(n)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, eps=config.adam_eps)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup from 0 over ``warmup`` steps, then linear decay to 0 at ``total``
    (transformers' ``get_linear_schedule_with_warmup``, which SimCSE and ConSERT use)."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@functools.cache
def code_version() -> dict[str, Any]:
    """Package version and the git commit of the code (with a dirty flag), when in a checkout.

    Cached, and first called when training starts: the manifest must name the code this process
    loaded, not whatever the checkout holds when a round (hours later) writes its manifest.
    """
    from benchharness import __version__

    info: dict[str, Any] = {"benchharness": __version__, "torch": torch.__version__}
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "encoders", "benchharness", "tasks"],
                               cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        info["git_commit"] = commit
        info["git_dirty"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    return info


def peak_memory(device: torch.device) -> dict[str, float]:
    """Peak resident memory of this process (MiB) and, on CUDA, peak allocated GPU memory."""
    out = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if device.type == "cuda":
        out["peak_cuda_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


class DevEvaluator:
    """STS-B dev Spearman of the encoder being trained, computed as the harness would.

    The 2909 unique dev sentences are tokenized once (length-sorted batches, as HFEncoder) and
    pooled with the same ``pool`` function the registered encoder will use; the task's own
    ``evaluate`` computes the correlation.
    """

    def __init__(self, tokenizer, pooling: str, max_length: int, batch_size: int, device: torch.device,
                 precision: str, task_name: str = DEV_TASK) -> None:
        import tasks
        from benchharness.data import DataRoot
        from benchharness.encoder import length_sorted_batches

        if pooling == "prompt":
            raise ValueError("dev evaluation with pooling 'prompt' is not supported by the training loop")
        self.task = tasks.get(task_name)
        self.task.load(DataRoot())
        self.sentences = list(dict.fromkeys(self.task.sentences()))
        self.pooling = pooling
        self.device = device
        self.precision = precision
        self.batches = []
        for idx in length_sorted_batches([len(s) for s in self.sentences], batch_size):
            enc = tokenizer([self.sentences[i] for i in idx], padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            self.batches.append((idx, dict(enc)))

    @torch.no_grad()
    def embed_all(self, encoder: nn.Module) -> np.ndarray:
        was_training = encoder.training
        encoder.eval()
        out = None
        try:
            for idx, enc in self.batches:
                enc = to_device(enc, self.device)
                with autocast(self.device, self.precision):
                    outputs = encoder(**enc, output_hidden_states=needs_hidden_states(self.pooling))
                vecs = pool(self.pooling, outputs, enc["attention_mask"]).float().cpu().numpy()
                if out is None:
                    out = np.empty((len(self.sentences), vecs.shape[1]), dtype=np.float32)
                out[idx] = vecs
        finally:
            encoder.train(was_training)
        return out

    def __call__(self, encoder: nn.Module) -> float:
        vectors = self.embed_all(encoder)
        row = {s: i for i, s in enumerate(self.sentences)}
        metrics = self.task.evaluate(lambda sents: vectors[[row[s] for s in sents]], seed=0)
        return float(metrics[self.task.metadata.main_score])


# ----------------------------------------------------------------------------------------------
# the loop


def _batch_order(n: int, batch_size: int, drop_last: bool, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of one epoch: a permutation seeded by (seed, epoch), so resumption recomputes it."""
    gen = torch.Generator().manual_seed(seed * 1000 + epoch)
    perm = torch.randperm(n, generator=gen).numpy()
    stop = (n // batch_size) * batch_size if drop_last else n
    return [perm[i : i + batch_size] for i in range(0, stop, batch_size)]


def total_steps(n_examples: int, config: TrainConfig) -> int:
    per_epoch = n_examples // config.batch_size if config.drop_last else math.ceil(n_examples / config.batch_size)
    if per_epoch < 1:
        raise ValueError(f"{n_examples} training examples give no full batch of {config.batch_size}")
    return config.max_steps if config.max_steps is not None else per_epoch * config.epochs


def _rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _log(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf8") as fh:
        fh.write(json.dumps(record) + "\n")


def _config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    return [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in current
            if k not in RESUMABLE_CHANGES and saved.get(k) != current.get(k)]


def _prepare_out(config: TrainConfig) -> Path | None:
    """Create the output folder; return the checkpoint to resume from, if any."""
    out = config.out
    ckpt = out / CHECKPOINT_DIR / CHECKPOINT_FILE
    if config.overwrite and out.exists():
        shutil.rmtree(out)
    if (out / "manifest.json").exists():
        raise ValueError(f"{out} already holds a finished run (manifest.json); pass --overwrite to retrain")
    if ckpt.exists():
        return ckpt
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty (no checkpoint to resume); pass --overwrite or choose --out")
    out.mkdir(parents=True, exist_ok=True)
    return None


def train(method: TrainingMethod, examples: Sequence[Any], config: TrainConfig, *,
          data: dict[str, Any], base_source: hub.ModelSource | None = None,
          dev: Callable[[nn.Module], float] | None = None) -> TrainResult:
    """Train ``method`` on ``examples`` as ``config`` says and write the output folder.

    ``data`` describes the training data for the manifest (name, size, description...).
    ``dev`` overrides the STS-B dev evaluator (a callable encoder -> score, higher is better);
    it is only built when ``config.eval_every`` is set or ``eval_at_start`` is true.
    Rerunning with the same ``out`` resumes from the checkpoint there (the configuration must
    match, except for the settings in ``RESUMABLE_CHANGES``).
    """
    code_version()  # pin the version of the code now running (see code_version)
    if config.threads:
        torch.set_num_threads(config.threads)
    device = pick_device(config.device)
    precision = check_precision(config.precision, device)
    pooling = config.eval_pooling or method.eval_pooling
    resume_from = _prepare_out(config)
    out = config.out
    metrics_path = out / "metrics.jsonl"
    steps = total_steps(len(examples), config)
    warmup = math.ceil(config.warmup_ratio * steps)  # ConSERT rounds up; 0 stays 0
    checkpoint_every = config.checkpoint_every or config.eval_every or 500

    seed_everything(config.seed)
    method.to(device)
    method.train()
    optimizer = make_optimizer(method, config)
    scheduler = linear_schedule(optimizer, warmup, steps)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    wants_dev = config.eval_every is not None or config.eval_at_start
    if dev is None and wants_dev:
        dev = DevEvaluator(method.tokenizer, pooling, config.eval_max_length, config.eval_batch_size, device, precision)

    state: dict[str, Any] = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "dev_curve": [], "best_step": None,
                             "best_dev": None, "bad_evals": 0, "train_seconds": 0.0, "sentences": 0,
                             "stopped_early": False}
    if resume_from is not None:
        saved = torch.load(resume_from, map_location="cpu", weights_only=False)
        diffs = _config_differences(saved["config"], config.to_dict())
        if diffs:
            raise ValueError(f"{resume_from}: the checkpoint was made with other settings ({'; '.join(diffs)}); "
                             "pass the same settings to resume, or --overwrite to start again")
        method.load_state_dict(saved["method"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        scaler.load_state_dict(saved["scaler"])
        state = saved["state"]
        _set_rng_state(saved["rng"])
        print(f"resuming {out} at step {state['step']}/{steps}", file=sys.stderr)

    def save_encoder() -> None:
        target = out / "model"
        tmp = out / "model.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        method.encoder.save_pretrained(tmp)
        method.tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)

    def save_checkpoint() -> None:
        (out / CHECKPOINT_DIR).mkdir(exist_ok=True)
        _atomic_save({"config": config.to_dict(), "method": method.state_dict(), "optimizer": optimizer.state_dict(),
                      "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "state": state,
                      "rng": _rng_state()}, out / CHECKPOINT_DIR / CHECKPOINT_FILE)

    def evaluate(step: int) -> bool:
        """Record a dev score; save the encoder if it is the best so far. True = stop early."""
        score = dev(method.encoder)
        state["dev_curve"].append([step, score])
        record = {"step": step, "dev_spearman": score}
        if step > 0:  # the untrained base (step 0) is recorded, never selected
            if state["best_dev"] is None or score > state["best_dev"]:
                state["best_dev"], state["best_step"], state["bad_evals"] = score, step, 0
                save_encoder()
                record["best"] = True
            else:
                state["bad_evals"] += 1
        _log(metrics_path, record)
        bar.write(f"step {step}: STS-B dev spearman {score:.2f} (best {state['best_dev'] or float('nan'):.2f} "
                  f"at step {state['best_step']})")
        return config.patience is not None and state["bad_evals"] >= config.patience

    bar = tqdm(total=steps, initial=state["step"], desc=f"train {method.method_name}", unit="step",
               disable=not config.progress, dynamic_ncols=True)
    if state["step"] == 0 and config.eval_at_start and dev is not None and not state["dev_curve"]:
        evaluate(0)
    window: dict[str, list[float]] = {}
    halted = False
    while state["step"] < steps and not state["stopped_early"]:
        batches = _batch_order(len(examples), config.batch_size, config.drop_last, config.seed, state["epoch"])
        while state["batch_in_epoch"] < len(batches) and state["step"] < steps:
            idx = batches[state["batch_in_epoch"]]
            chunk = [examples[int(i)] for i in idx]
            t0 = time.perf_counter()
            batch = to_device(method.collate(chunk), device)
            with autocast(device, precision):
                output = method(batch)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(output.loss).backward()
            if config.grad_clip is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(method.parameters(), config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            state["train_seconds"] += time.perf_counter() - t0
            state["sentences"] += method.size(batch, chunk)
            state["step"] += 1
            state["batch_in_epoch"] += 1
            step = state["step"]
            loss = float(output.loss.detach())
            if not math.isfinite(loss):
                raise FloatingPointError(f"loss is {loss} at step {step}; lower --lr or use fp32")
            for k, v in {"loss": loss, **output.logs}.items():
                window.setdefault(k, []).append(float(v))
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}")
            if step % config.log_every == 0 or step == steps:
                _log(metrics_path, {"step": step, "epoch": state["epoch"], "lr": scheduler.get_last_lr()[0],
                                    **{k: float(np.mean(v)) for k, v in window.items()},
                                    "sentences_per_second": state["sentences"] / max(state["train_seconds"], 1e-9)})
                window = {}
            if config.eval_every is not None and dev is not None and (step % config.eval_every == 0 or step == steps):
                if evaluate(step):
                    state["stopped_early"] = True
                    bar.write(f"early stop: no dev improvement in {config.patience} evaluations")
                    break
            if step % checkpoint_every == 0 and step < steps:
                save_checkpoint()
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
        save_checkpoint()
        print(f"stopped after step {state['step']}; rerun the same command to resume", file=sys.stderr)
        return TrainResult(out, state["step"], False, state["best_step"], state["best_dev"], None)

    if config.eval_every is None or dev is None:
        save_encoder()  # no dev selection: the final weights are the encoder
        if dev is not None:
            state["dev_curve"].append([state["step"], dev(method.encoder)])
            _log(metrics_path, {"step": state["step"], "dev_spearman": state["dev_curve"][-1][1]})
    manifest = write_manifest(method, config, state, data, base_source or hub.resolve(base_folder(config.base)), pooling,
                              steps, warmup, device, precision)
    if not config.keep_checkpoint and (out / CHECKPOINT_DIR).exists():
        shutil.rmtree(out / CHECKPOINT_DIR)
    return TrainResult(out, state["step"], True, state["best_step"], state["best_dev"], manifest)


def write_manifest(method: TrainingMethod, config: TrainConfig, state: dict[str, Any], data: dict[str, Any],
                   source: hub.ModelSource, pooling: str, steps: int, warmup: int, device: torch.device,
                   precision: str) -> dict[str, Any]:
    """Write ``manifest.json``: everything needed to know what this encoder is and to load it."""
    hyper = {k: v for k, v in config.to_dict().items()
             if k not in ("base", "out", "data", "name", "device", "threads", "stop_after", "overwrite", "progress",
                          "keep_checkpoint")}
    hyper.update({"total_steps": steps, "warmup_steps": warmup, **method.hyperparameters()})
    seconds = state["train_seconds"]
    manifest = {
        "name": config.name or config.out.resolve().name,
        "method": method.method_name,
        "base_model": source.name,
        "base_revision": source.revision,
        "base_weights_sha256": source.weights_sha256,
        "data": data,
        "hyperparameters": hyper,
        "code_version": code_version(),
        "dev_task": DEV_TASK if state["dev_curve"] else None,
        "dev_curve": state["dev_curve"],
        "selection": ({"rule": "best STS-B dev spearman over evaluations after step 0",
                       "best_step": state["best_step"], "best_dev_spearman": state["best_dev"]}
                      if config.eval_every is not None and state["best_step"] is not None
                      else {"rule": "final weights", "best_step": state["step"]}),
        "training": {"steps": state["step"], "epochs_completed": state["epoch"],
                     "batches_into_next_epoch": state["batch_in_epoch"],
                     "stopped_early": state["stopped_early"], "train_seconds": round(seconds, 2),
                     "sentences": state["sentences"],
                     "sentences_per_second": round(state["sentences"] / max(seconds, 1e-9), 2),
                     "device": str(device), "precision": precision, "torch_threads": torch.get_num_threads(),
                     **{k: round(v, 1) for k, v in peak_memory(device).items()}},
        "encoder": {"type": "hf", "model": "model", "pooling": pooling, "max_length": config.eval_max_length},
    }
    (config.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


# ----------------------------------------------------------------------------------------------
# command line shared by the methods


def add_training_arguments(parser: argparse.ArgumentParser, presets: dict[str, dict[str, Any]] | None = None,
                           default_preset: str | None = None) -> None:
    """The flags every method shares. Unset flags (None) take the preset's value, then
    ``TrainConfig``'s default; see :func:`resolve_options`."""
    g = parser.add_argument_group("training (shared by all methods)")
    g.add_argument("--base", required=True, help="Hugging Face model id or folder of the encoder to fine-tune")
    g.add_argument("--out", required=True, type=Path, help="output folder (runs/<name>); rerun to resume")
    g.add_argument("--name", help="name the run registers under (default: the --out folder name)")
    if presets:
        g.add_argument("--preset", choices=sorted(presets), default=default_preset,
                       help=f"hyper-parameter preset (default {default_preset}); explicit flags override it")
    g.add_argument("--data", help="training data (default: the method's; see `benchharness train <method> -h`)")
    g.add_argument("--max-length", type=int, help="max tokens per training sentence")
    g.add_argument("--batch-size", type=int)
    g.add_argument("--lr", type=float, help="peak learning rate (AdamW)")
    g.add_argument("--weight-decay", type=float)
    g.add_argument("--epochs", type=int)
    g.add_argument("--max-steps", type=int, help="total optimizer steps (overrides --epochs)")
    g.add_argument("--warmup-ratio", type=float, help="fraction of steps of linear warmup")
    g.add_argument("--grad-clip", type=float, help="max gradient norm (default: none)")
    g.add_argument("--limit", type=int, help="train on the first N examples only")
    g.add_argument("--eval-every", type=int, help="steps between STS-B dev evaluations (0 = none: keep final)")
    g.add_argument("--patience", type=int, help="early stop after N evaluations without dev improvement")
    g.add_argument("--eval-pooling", choices=POOLINGS, help="pooling at evaluation (default: the method's)")
    g.add_argument("--eval-max-length", type=int, help="truncation at evaluation, recorded in the manifest")
    g.add_argument("--seed", type=int)
    g.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    g.add_argument("--precision", choices=PRECISIONS, help="fp16/bf16 mixed precision (CUDA only)")
    g.add_argument("--threads", type=int, help="torch CPU threads")
    g.add_argument("--stop-after", type=int, help="stop this invocation after step N (resumable)")
    g.add_argument("--keep-checkpoint", action="store_true", default=None, help="keep the resumable checkpoint")
    g.add_argument("--overwrite", action="store_true", default=None, help="discard what --out holds and retrain")
    g.add_argument("--quiet", action="store_true", help="no progress bar")


def resolve_options(args: argparse.Namespace, presets: dict[str, dict[str, Any]] | None = None,
                    defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge ``defaults`` < the chosen preset < explicitly given flags into one dict."""
    opts: dict[str, Any] = dict(defaults or {})
    preset = getattr(args, "preset", None)
    if presets and preset:
        opts.update(presets[preset])
    opts.update({k: v for k, v in vars(args).items() if v is not None})
    if opts.get("eval_every") == 0:
        opts["eval_every"] = None
    return opts


def config_from_options(opts: dict[str, Any]) -> TrainConfig:
    """A ``TrainConfig`` from merged options (keys that are not config fields are ignored)."""
    names = set(TrainConfig.field_names())
    kwargs = {k: v for k, v in opts.items() if k in names}
    kwargs["progress"] = not opts.get("quiet", False)
    return TrainConfig(**kwargs)


def report(result: TrainResult) -> int:
    """Print what a finished (or paused) run produced; the CLI exit status."""
    if not result.completed:
        return 0
    m = result.manifest or {}
    t = m.get("training", {})
    print(f"trained {m.get('name')} ({m.get('method')} on {m.get('base_model')}): {t.get('steps')} steps, "
          f"{t.get('train_seconds')} s, {t.get('sentences_per_second')} sentences/s, peak RSS {t.get('peak_rss_mib')} MiB")
    if result.best_dev is not None:
        print(f"best STS-B dev spearman {result.best_dev:.2f} at step {result.best_step}")
    print(f"encoder registered: {result.out} (benchharness run --encoders {m.get('name')} --tasks sts)")
    return 0
