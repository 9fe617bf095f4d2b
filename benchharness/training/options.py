"""A training method's options as one typed value, and how presets and given values resolve into it.

Every method declares its options as a frozen dataclass that extends :class:`TrainingOptions` (the
settings the loop reads: batch size, learning rate, evaluation, seed...) with its own fields. Each
field carries its default, its help text and its checks through :func:`option`; the command line
derives its flags from these declarations, and ``benchharness.train(**options)``, the recipe file
and ``benchharness train`` all build the same value from them. A tuner's options are declared the
same way (:class:`Declared`).

A run's options resolve in one order, lowest first: the declared defaults, the chosen preset, then
the values given (flags, a recipe's ``options``, keywords). What resolves is also recorded as a
plain mapping, which the recipe key hashes (``benchharness.training.recipes``): every field a preset
or a caller set, and every field declared ``recorded="always"``. A field declared
``recorded="when-set"`` enters the record only when something sets it, so that adding a setting
never changes the key of a recipe that does not use it.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

from benchharness.core.devices import PRECISIONS
from benchharness.core.errors import InvalidInputError
from benchharness.core.flag_types import (
    descending_sizes,
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    weight_list,
)
from benchharness.encoders.pooling import POOLINGS

#: the optimizers ``loop.make_optimizer`` builds: ``torch.optim.AdamW``, or the legacy
#: ``transformers.AdamW`` that the official code of every method here steps with (``optim.py``)
OPTIMIZERS = ("torch-adamw", "adamw-legacy")
#: how a data-parallel run's contrastive losses see the other processes' rows (``data_parallel.in_batch``):
#: gathered with gradients (exactly the single-process gradient), or as SimCSE's official code does
NEGATIVES = ("gather-grad", "gather-detached")
#: settings of data-parallel runs only: a single-process run records none of them, so its checkpoint,
#: manifest and recipe key are exactly what they were before data-parallel training existed
DATA_PARALLEL_FIELDS = ("nproc", "negatives")
#: the Matryoshka loss's settings (``training/matryoshka.py``): a run without them records neither, so
#: that its checkpoint, manifest and recipe key are exactly what they were before the loss existed
MATRYOSHKA_FIELDS = ("matryoshka_dims", "matryoshka_weights")

Recorded = Literal["always", "when-set"]


@dataclass(frozen=True)
class Option:
    """What a field of an options class declares besides its type and default.

    ``parse`` turns a command-line word into a value and refuses one out of range (raising
    ``core.flag_types.BadValue``, a ``ValueError`` that argparse also reads); ``check``
    refuses a value given from Python or a recipe file (default: ``parse`` applied to the value's
    text, so one rule serves both). ``flag`` is the option's command-line flag (None: not on the
    command line); a switch (a bool) may have an ``off_flag`` that sets it False."""

    help: str | None = None
    parse: Callable[[str], Any] | None = None
    check: Callable[[str], Any] | None = None
    choices: tuple[Any, ...] | None = None
    flag: str | None = ""
    off_flag: str | None = None
    off_help: str | None = None
    recorded: Recorded = "always"

    def flag_for(self, name: str) -> str | None:
        """The flag: the declared one, else ``--`` and the name with dashes."""
        if self.flag is None:
            return None
        return self.flag or "--" + name.replace("_", "-")


def option(
    default: Any,
    help: str | None = None,
    *,
    parse: Callable[[str], Any] | None = None,
    check: Callable[[str], Any] | None = None,
    choices: tuple[Any, ...] | None = None,
    flag: str | None = "",
    off_flag: str | None = None,
    off_help: str | None = None,
    recorded: Recorded = "always",
) -> Any:
    """A field of an options class (see :class:`Option`)."""
    meta = Option(help, parse, check, choices, flag, off_flag, off_help, recorded)
    return field(default=default, metadata={"option": meta})


def shared_option(name: str, default: Any) -> Any:
    """A shared option redeclared in a method's options class with the method's own default (its
    help and checks unchanged)."""
    return field(default=default, metadata=TrainingOptions.__dataclass_fields__[name].metadata)


def declared(cls: type) -> list[tuple[str, Option, Any]]:
    """Every option of an options class: its name, declaration and default, in field order."""
    return [(f.name, f.metadata.get("option", Option()), f.default) for f in fields(cls)]


def _allowed(hint: Any) -> tuple[type, ...]:
    """The plain types a field's annotation admits (``int | None`` -> ``(int, NoneType)``;
    ``tuple[int, ...]`` -> ``tuple``, its items checked by the field's rule)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return tuple(t for part in typing.get_args(hint) for t in _allowed(part))
    if typing.get_origin(hint) is tuple:
        return (tuple,)
    return (type(None),) if hint is None else (hint,)


def _kind(allowed: tuple[type, ...]) -> str:
    names = {
        int: "an integer",
        float: "a number",
        bool: "true or false",
        str: "a string",
        Path: "a path",
        tuple: "a list",
    }
    return " or ".join(names.get(t, "None" if t is type(None) else t.__name__) for t in allowed)


def _as_declared(value: Any, hint: Any) -> Any:
    """``value`` with an integer where the annotation declares a float made that float, alone or
    as an item of a ``tuple[float, ...]``: 2 and 2.0 are one setting, and one recipe key."""
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    for part in typing.get_args(hint) if union else (hint,):
        if part is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, tuple) and typing.get_origin(part) is tuple and typing.get_args(part)[:1] == (float,):
            return tuple(_as_declared(v, float) for v in value)
    return value


def _fits(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and (int in allowed or float in allowed):
        return True
    return any(t is not bool and isinstance(value, t) for t in allowed)


@dataclass(frozen=True)
class Declared:
    """Options declared one field at a time with :func:`option`: a training method's, a tuner's. Each
    value is checked when the value is made, whoever gives it (a flag, a recipe file, a keyword), in
    one line: against the field's type, its choices and its rule."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for name, meta, _ in declared(type(self)):
            value = getattr(self, name)
            if isinstance(value, list):  # a recipe file's or a caller's list: one value type, the tuple
                value = tuple(value)
                object.__setattr__(self, name, value)
            allowed = _allowed(hints[name])
            if not _fits(value, allowed):
                raise InvalidInputError(f"{name} must be {_kind(allowed)}, got {value!r}")
            if value is None:
                continue
            if meta.choices is not None and value not in meta.choices:
                raise InvalidInputError(
                    f"unknown {name.replace('_', ' ')} {value!r}; choose one of {', '.join(map(str, meta.choices))}"
                )
            rule = meta.check or meta.parse
            if rule is not None and not isinstance(value, bool):
                try:
                    rule(flag_text(value))
                except ValueError as exc:  # flag_types.BadValue: the rule's own words
                    raise InvalidInputError(f"{name} {exc}") from None
            object.__setattr__(self, name, _as_declared(value, hints[name]))


@dataclass(frozen=True)
class TrainingOptions(Declared):
    """The settings every method shares: what the loop trains with. A method's own options class
    extends it (and may redeclare a shared field to give it the method's default)."""

    #: whether ``eval_at_start`` without ``eval_every`` scores the dev set before and after training
    #: (DefSent+'s ``--dev``); for the others, ``eval_every`` 0 is no dev evaluation at all
    DEV_WITHOUT_PERIOD: ClassVar[bool] = False

    data: str = option("sts-unlabeled", "training data (default: the method's; see `benchharness train <method> -h`)")
    max_length: int = option(64, "max tokens per training sentence", parse=positive_int)
    batch_size: int = option(64, None, parse=positive_int)
    lr: float = option(
        3e-5,
        "peak learning rate (AdamW)",
        parse=positive_float,
        # lr 0 trains nothing, yet is a valid setting for a library caller (DefSent+'s per-round rates use
        # it to show that each round restarts from the original checkpoint); --lr asks for > 0
        check=non_negative_float,
    )
    weight_decay: float = option(0.0, None, parse=non_negative_float)
    adam_eps: float = option(1e-8, "AdamW epsilon", parse=positive_float)
    optimizer: str = option(
        "torch-adamw",
        "torch-adamw (torch.optim.AdamW) or adamw-legacy (the legacy transformers.AdamW, "
        "which the official code of every method uses; the presets' choice)",
        choices=OPTIMIZERS,
    )
    correct_bias: bool = option(
        True,
        "Adam's bias correction of the step size (torch-adamw always applies it)",
        flag="--correct-bias",
        off_flag="--no-correct-bias",
        off_help="adamw-legacy without bias correction (ConSERT's official setting)",
    )
    epochs: int = option(1, None, parse=positive_int)
    max_steps: int | None = option(None, "total optimizer steps (overrides --epochs)", parse=positive_int)
    warmup_ratio: float = option(0.1, "fraction of steps of linear warmup", parse=fraction)
    grad_clip: float | None = option(None, "max gradient norm (default: none)", parse=positive_float)
    drop_last: bool = option(True, flag=None)  # contrastive losses want full batches (constant negatives)
    limit: int | None = option(None, "train on the first N examples only", parse=positive_int)
    eval_every: int | None = option(
        200,
        "steps between STS-B dev evaluations (0 = none: keep final)",
        parse=non_negative_int,
        check=positive_int,  # None, not 0, is "no dev selection" in a value
    )
    eval_at_start: bool = option(True, flag=None)  # the base model's dev score as step 0 (never selected)
    patience: int | None = option(None, "early stop after N evaluations without dev improvement", parse=positive_int)
    eval_pooling: str | None = option(None, "pooling at evaluation (default: the method's)", choices=POOLINGS)
    eval_max_length: int = option(512, "truncation at evaluation, recorded in the manifest", parse=positive_int)
    eval_batch_size: int = option(128, flag=None, check=positive_int)
    checkpoint_every: int | None = option(None, flag=None, check=positive_int)  # default: at every evaluation, else 500
    log_every: int = option(10, flag=None, check=positive_int)
    seed: int = option(42, None, parse=non_negative_int)
    precision: str = option(
        "fp32",
        "mixed precision (autocast): fp16 or bf16 on CUDA, bf16 on a CPU with native bf16 "
        "(avx512_bf16 or amx_bf16); part of the recipe key",
        choices=PRECISIONS,
    )
    nproc: int = option(
        1,
        "data-parallel training in N processes (torchrun, DDP; one per GPU on CUDA); the batch "
        "size is the global batch, split evenly. Part of the recipe when N > 1",
        parse=positive_int,
    )
    negatives: str = option(
        "gather-grad",
        "with --nproc: contrastive losses gather the other processes' rows with gradients "
        "(gather-grad, default: the single-process gradient) or as SimCSE's code does "
        "(gather-detached: only local rows carry gradient)",
        choices=NEGATIVES,
    )
    matryoshka_dims: tuple[int, ...] | None = option(
        None,
        "train with a Matryoshka loss at these embedding sizes, largest first (e.g. 384,256,128,64): "
        "the method's loss on the first d dimensions of its embedding, summed over the sizes "
        "(sentence-transformers' MatryoshkaLoss); part of the recipe key",
        parse=descending_sizes,
        recorded="when-set",
    )
    matryoshka_weights: tuple[float, ...] | None = option(
        None,
        "with --matryoshka-dims: each size's weight in the sum (default 1 each, as MatryoshkaLoss)",
        parse=weight_list,
        recorded="when-set",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.correct_bias and self.optimizer != "adamw-legacy":
            raise InvalidInputError(
                f"correct_bias=False needs optimizer adamw-legacy: {self.optimizer} always corrects the bias"
            )
        if self.nproc == 1 and self.negatives != NEGATIVES[0]:
            raise InvalidInputError(
                f"negatives {self.negatives} applies to data-parallel runs only; add --nproc N "
                "(N > 1) or drop --negatives"
            )
        if self.matryoshka_weights is not None and self.matryoshka_dims is None:
            raise InvalidInputError("matryoshka_weights weighs the sizes of matryoshka_dims: set matryoshka_dims too")
        if self.matryoshka_weights is not None and len(self.matryoshka_weights) != len(self.matryoshka_dims or ()):
            raise InvalidInputError(
                f"matryoshka_weights gives {len(self.matryoshka_weights)} weights for "
                f"{len(self.matryoshka_dims or ())} matryoshka_dims; give one weight per size"
            )
        if self.batch_size % self.nproc:
            raise InvalidInputError(
                f"batch size {self.batch_size} does not split into {self.nproc} equal slices, "
                f"one per process; choose a batch size divisible by --nproc {self.nproc}"
            )

    @property
    def dev_at_start(self) -> bool:
        """Whether the run scores the base model on the dev set first (step 0, never selected): with
        periodic evaluation, or where a method scores before and after training without a period
        (:attr:`DEV_WITHOUT_PERIOD`); ``eval_every`` 0 (None) otherwise means no dev evaluation."""
        return self.eval_at_start and (self.eval_every is not None or self.DEV_WITHOUT_PERIOD)

    @property
    def wants_dev(self) -> bool:
        """Whether the run evaluates on the dev set at all (periodically, or before and after)."""
        return self.eval_every is not None or self.dev_at_start

    def sentence_data(self) -> str | None:
        """Why ``sentences=`` cannot stand for this run's data (None: it trains on sentences, so it
        can). A method whose data is something else (pairs, a dictionary) says what it takes."""
        return None

    def shared(self) -> dict[str, Any]:
        """The shared settings (``TrainingOptions``' own fields), as the loop records them: a
        single-process run leaves out ``DATA_PARALLEL_FIELDS``, a run without a Matryoshka loss
        ``MATRYOSHKA_FIELDS``."""
        names = [f.name for f in fields(TrainingOptions)]
        left_out = (DATA_PARALLEL_FIELDS if self.nproc == 1 else ()) + (
            MATRYOSHKA_FIELDS if self.matryoshka_dims is None else ()
        )
        return {k: getattr(self, k) for k in names if k not in left_out}


def flag_text(value: Any) -> str:
    """A value as its flag writes it: a list comma-separated, a float exactly (``repr``)."""
    if isinstance(value, tuple | list):
        return ",".join(flag_text(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


#: a method's extra step of resolution: the record so far and the values given -> the record
Adjust = Callable[[dict[str, Any], Mapping[str, Any]], dict[str, Any]]


def unknown_option(method: str, cls: type[TrainingOptions], name: str) -> InvalidInputError:
    """The one error for a name the method does not declare: the close match, then every option."""
    known = [n for n, _, _ in declared(cls)]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InvalidInputError(f"{method} has no option {name!r}{hint}; options: {', '.join(sorted(known))}")


def resolve(
    method: str,
    cls: type[TrainingOptions],
    presets: Mapping[str, Mapping[str, Any]],
    preset: str | None,
    given: Mapping[str, Any],
    adjust: Adjust | None = None,
) -> tuple[TrainingOptions, dict[str, Any]]:
    """The typed options and their record, from a preset (None: no preset) and given values.

    The record holds every ``recorded="always"`` field at its default, the preset's values, the given
    ones (a method's ``adjust`` may change it further), and the data-parallel settings only for a
    run in several processes; it is what a recipe key hashes."""
    known = {n: meta for n, meta, _ in declared(cls)}
    for name in given:
        if name not in known:
            raise unknown_option(method, cls, name)
    record = {n: default for n, meta, default in declared(cls) if meta.recorded == "always" and default is not MISSING}
    if preset is not None:
        if preset not in presets:
            raise InvalidInputError(f"unknown preset {preset!r}; choose one of {', '.join(sorted(presets))}")
        record.update(presets[preset])
    record.update(given)
    if record.get("eval_every") == 0:
        record["eval_every"] = None
    if adjust is not None:
        record = adjust(record, given)
    value = cls(**record)
    record = {k: v for k, v in record.items() if k not in DATA_PARALLEL_FIELDS}
    if value.nproc > 1:
        record.update({k: getattr(value, k) for k in DATA_PARALLEL_FIELDS})
    return value, dict(sorted(record.items()))
