"""Every setting of a training run (:class:`TrainConfig`) and the command-line flags all methods
share, merged with a method's presets into one config.

Precedence, lowest first: ``TrainConfig``'s defaults, a method's defaults, the chosen preset, then
flags given explicitly (flags default to None so that "not given" can be told apart).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from benchharness.core.devices import PRECISIONS
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import fraction, non_negative_float, non_negative_int, positive_float, positive_int
from benchharness.encoders.pooling import POOLINGS

#: fields that must be integers >= 1 when set (``max_steps=0`` would train nothing, ``limit=0``
#: would silently mean "no limit"); ``eval_every=0`` is turned into None ("no dev") by the flags
POSITIVE_INTS = (
    "batch_size",
    "max_length",
    "epochs",
    "max_steps",
    "limit",
    "eval_every",
    "patience",
    "eval_max_length",
    "eval_batch_size",
    "checkpoint_every",
    "log_every",
    "threads",
    "stop_after",
    "nproc",
)
POSITIVE_FLOATS = ("adam_eps", "grad_clip")
#: the optimizers ``loop.make_optimizer`` builds: ``torch.optim.AdamW``, or the legacy
#: ``transformers.AdamW`` that the official code of every method here steps with (``optim.py``)
OPTIMIZERS = ("torch-adamw", "adamw-legacy")
#: how a data-parallel run's contrastive losses see the other processes' rows (``data_parallel.in_batch``):
#: gathered with gradients (exactly the single-process gradient), or as SimCSE's official code does
NEGATIVES = ("gather-grad", "gather-detached")
#: settings of data-parallel runs only: a single-process config records none of them (``to_dict``), so its
#: checkpoint, manifest and recipe key are exactly what they were before data-parallel training existed
DATA_PARALLEL_FIELDS = ("nproc", "negatives")


@dataclass
class TrainConfig:
    """Every setting of a training run; all of it is recorded in the checkpoint and the manifest."""

    base: str
    out: Path
    data: str = "sts-unlabeled"
    name: str | None = None  # the name the run registers under (manifest); default: out folder name
    max_length: int = 64  # tokens per training sentence
    batch_size: int = 64
    lr: float = 3e-5
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    optimizer: str = "torch-adamw"  # one of OPTIMIZERS; the methods' presets choose adamw-legacy
    correct_bias: bool = True  # Adam's bias correction; only adamw-legacy can leave it out (ConSERT)
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
    precision: str = "fp32"  # fp16/bf16 autocast on CUDA (GradScaler for fp16); bf16 on CPUs with native bf16
    threads: int | None = None  # torch CPU threads
    stop_after: int | None = None  # end this invocation after this step, resumable (time-boxing)
    overwrite: bool = False  # discard an existing finished run or checkpoint in ``out``
    nproc: int = 1  # processes of a data-parallel run (torchrun, one per device); the global batch is split
    negatives: str = "gather-grad"  # data-parallel runs: one of NEGATIVES

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.precision not in PRECISIONS:
            raise InvalidInputError(f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if self.eval_pooling is not None and self.eval_pooling not in POOLINGS:
            raise InvalidInputError(f"unknown pooling {self.eval_pooling!r}; choose one of {', '.join(POOLINGS)}")
        if self.optimizer not in OPTIMIZERS:
            raise InvalidInputError(f"unknown optimizer {self.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
        if not isinstance(self.correct_bias, bool):
            raise InvalidInputError(f"correct_bias must be true or false, got {self.correct_bias!r}")
        if not self.correct_bias and self.optimizer != "adamw-legacy":
            raise InvalidInputError(
                f"correct_bias=False needs optimizer adamw-legacy: {self.optimizer} always corrects the bias"
            )
        for key in POSITIVE_INTS:  # None = unset where the field allows it
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidInputError(f"{key} must be a positive integer, got {value!r}")
        for key in POSITIVE_FLOATS:
            value = getattr(self, key)
            if value is not None and not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise InvalidInputError(f"{key} must be a positive number, got {value!r}")
        # lr 0 trains nothing, yet is a valid setting for a library caller (DefSent+'s per-round rates
        # use it to show that each round restarts from the original checkpoint); --lr asks for > 0
        if not (isinstance(self.lr, (int, float)) and 0.0 <= self.lr < float("inf")):
            raise InvalidInputError(f"lr must be a number >= 0, got {self.lr!r}")
        if not 0.0 <= self.weight_decay < float("inf"):
            raise InvalidInputError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise InvalidInputError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise InvalidInputError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.negatives not in NEGATIVES:
            raise InvalidInputError(f"unknown negatives {self.negatives!r}; choose one of {', '.join(NEGATIVES)}")
        if self.nproc == 1 and self.negatives != NEGATIVES[0]:
            raise InvalidInputError(
                f"negatives {self.negatives} applies to data-parallel runs only; add --nproc N "
                "(N > 1) or drop --negatives"
            )
        if self.batch_size % self.nproc:
            raise InvalidInputError(
                f"batch size {self.batch_size} does not split into {self.nproc} equal slices, "
                f"one per process; choose a batch size divisible by --nproc {self.nproc}"
            )

    @property
    def wants_dev(self) -> bool:
        """Whether the run evaluates on the dev set at all (periodically, or once at step 0)."""
        return self.eval_every is not None or self.eval_at_start

    def to_dict(self) -> dict[str, Any]:
        """Every setting; a single-process run leaves out ``DATA_PARALLEL_FIELDS``."""
        return {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in asdict(self).items()
            if self.nproc > 1 or k not in DATA_PARALLEL_FIELDS
        }

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def add_training_arguments(
    parser: argparse.ArgumentParser, presets: dict[str, dict[str, Any]] | None = None, default_preset: str | None = None
) -> None:
    """The flags every method shares. Unset flags (None) take the preset's value, then
    ``TrainConfig``'s default; see :func:`resolve_options`. Every flag that changes what is
    trained defaults to None, so that a recipe (``benchharness.training.recipes``) can tell the flags a
    user gave from those left to the recipe."""
    g = parser.add_argument_group("training (shared by all methods)")
    g.add_argument(
        "--recipe",
        help="start from this named recipe (default: the one named after the method; "
        "see encoders/methods/recipes.toml); the flags below change it",
    )
    g.add_argument("--base", help="Hugging Face model id or folder of the encoder to fine-tune (default: the recipe's)")
    g.add_argument(
        "--out",
        type=Path,
        help="output folder (default: the recipe's run in the runs folder, keyed by the recipe); rerun to resume",
    )
    g.add_argument("--name", help="name the run registers under (default: the --out folder name)")
    if presets:
        g.add_argument(
            "--preset",
            choices=sorted(presets),
            help=f"hyper-parameter preset (default {default_preset}); explicit flags override it",
        )
    g.add_argument("--data", help="training data (default: the method's; see `benchharness train <method> -h`)")
    g.add_argument("--max-length", type=positive_int, help="max tokens per training sentence")
    g.add_argument("--batch-size", type=positive_int)
    g.add_argument("--lr", type=positive_float, help="peak learning rate (AdamW)")
    g.add_argument("--weight-decay", type=non_negative_float)
    g.add_argument("--epochs", type=positive_int)
    g.add_argument("--max-steps", type=positive_int, help="total optimizer steps (overrides --epochs)")
    g.add_argument("--warmup-ratio", type=fraction, help="fraction of steps of linear warmup")
    g.add_argument("--grad-clip", type=positive_float, help="max gradient norm (default: none)")
    g.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        help="torch-adamw (torch.optim.AdamW) or adamw-legacy (the legacy transformers.AdamW, "
        "which the official code of every method uses; the presets' choice)",
    )
    g.add_argument("--adam-eps", type=positive_float, help="AdamW epsilon")
    g.add_argument(
        "--correct-bias",
        action="store_true",
        default=None,
        help="Adam's bias correction of the step size (torch-adamw always applies it)",
    )
    g.add_argument(
        "--no-correct-bias",
        dest="correct_bias",
        action="store_false",
        default=None,
        help="adamw-legacy without bias correction (ConSERT's official setting)",
    )
    g.add_argument("--limit", type=positive_int, help="train on the first N examples only")
    g.add_argument(
        "--eval-every", type=non_negative_int, help="steps between STS-B dev evaluations (0 = none: keep final)"
    )
    g.add_argument("--patience", type=positive_int, help="early stop after N evaluations without dev improvement")
    g.add_argument("--eval-pooling", choices=POOLINGS, help="pooling at evaluation (default: the method's)")
    g.add_argument("--eval-max-length", type=positive_int, help="truncation at evaluation, recorded in the manifest")
    g.add_argument("--seed", type=non_negative_int)
    g.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda if available)")
    g.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="mixed precision (autocast): fp16 or bf16 on CUDA, bf16 on a CPU with native bf16 "
        "(avx512_bf16 or amx_bf16); part of the recipe key",
    )
    g.add_argument(
        "--nproc",
        type=positive_int,
        help="data-parallel training in N processes (torchrun, DDP; one per GPU on CUDA); the batch "
        "size is the global batch, split evenly. Part of the recipe when N > 1",
    )
    g.add_argument(
        "--negatives",
        choices=NEGATIVES,
        help="with --nproc: contrastive losses gather the other processes' rows with gradients "
        "(gather-grad, default: the single-process gradient) or as SimCSE's code does "
        "(gather-detached: only local rows carry gradient)",
    )
    g.add_argument("--threads", type=positive_int, help="torch CPU threads")
    g.add_argument("--stop-after", type=positive_int, help="stop this invocation after step N (resumable)")
    g.add_argument("--keep-checkpoint", action="store_true", default=None, help="keep the resumable checkpoint")
    g.add_argument("--overwrite", action="store_true", default=None, help="discard what --out holds and retrain")
    g.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only, no progress bar")
    g.add_argument("--show", action="store_true", help="print the recipe these flags give, with its key, and exit")


def resolve_options(
    args: argparse.Namespace,
    presets: dict[str, dict[str, Any]] | None = None,
    defaults: dict[str, Any] | None = None,
    default_preset: str | None = None,
) -> dict[str, Any]:
    """Merge ``defaults`` < the chosen preset (``default_preset`` when none is given) < explicitly
    given flags into one dict; ``preset`` in the result names the preset used."""
    opts: dict[str, Any] = dict(defaults or {})
    preset = getattr(args, "preset", None) or default_preset
    if presets and preset:
        if preset not in presets:
            raise InvalidInputError(f"unknown preset {preset!r}; choose one of {', '.join(sorted(presets))}")
        opts.update(presets[preset])
    opts.update({k: v for k, v in vars(args).items() if v is not None})
    opts["preset"] = preset if presets else None
    if opts.get("eval_every") == 0:
        opts["eval_every"] = None
    return opts


def config_from_options(opts: dict[str, Any]) -> TrainConfig:
    """A ``TrainConfig`` from merged options (keys that are not config fields are ignored)."""
    names = set(TrainConfig.field_names())
    return TrainConfig(**{k: v for k, v in opts.items() if k in names})
