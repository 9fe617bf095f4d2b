"""How and where training runs, as one value: :class:`TrainSettings`, the twin of evaluation's
``RunSettings``.

Each edge builds it once: the command line from its flags (``cli/train.py``), ``benchharness.train``
from its keywords (``training/train.py``), on-demand training from the settings of the evaluation
that asks (``training/on_demand.py``). From there it travels whole: the plan's checks, the loop, the
dev evaluation (which scores with its configuration) and the outputs read it, and nothing reads the
configuration file again. Nothing here says what is trained, so nothing here enters a recipe key.

The run-time keys (the flags of ``benchharness train`` that say where or how a run goes) are
declared once, in :data:`RUNTIME`: their flags and help, their defaults, whether a checkpoint records
them and whether they may change when a run resumes. The command line adds their flags from it, a
recipe's command renders them from it (the processes of a data-parallel run get them back that way),
and recipe files and keywords are refused them by it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from benchharness.core.data_root import DataRoot
from benchharness.core.flag_types import positive_int
from benchharness.core.settings import Config, HubSettings, load_config

if TYPE_CHECKING:
    from torch import nn

    from benchharness.training.method import TrainingMethod
    from benchharness.training.options import TrainingOptions


class DevEvaluation(Protocol):
    """A dev evaluation the loop can call, and the name of the task it scores on (for the manifest)."""

    task_name: str

    def __call__(self, encoder: nn.Module, /) -> float: ...


#: builds the dev evaluation of a run from its module (tokenizer, pooling), its options and the settings
DevFactory = Callable[["TrainingMethod", "TrainingOptions", "TrainSettings"], DevEvaluation]


@dataclass(frozen=True)
class TrainSettings:
    """Where and how training runs: the configuration (the runs folder, the Hugging Face cache), the
    data root the examples and the dev split are read from (``data_dir``, else the configured one;
    ``verify_data``: checked against the pinned checksums), the device and torch's threads, progress
    bars, whether an output folder's run is retrained (``overwrite``), when to pause (``stop_after``,
    resumable), whether the checkpoint is kept, and the dev evaluation (``dev``: None refuses a run
    that asks for one; the edges give the harness's, ``dev_eval.for_training``)."""

    config: Config = field(default_factory=load_config, repr=False)
    data_dir: Path | None = None
    verify_data: bool = True
    device: str | None = None
    threads: int | None = None
    progress: bool = False
    overwrite: bool = False
    stop_after: int | None = None
    keep_checkpoint: bool = False
    dev: DevFactory | None = None

    def data(self) -> DataRoot:
        """The data root (``data_dir``, else the configured one), checked as ``verify_data`` says."""
        return DataRoot(self.config.data_root(self.data_dir), self.verify_data)

    @property
    def hub(self) -> HubSettings:
        """Where Hugging Face models are found, and whether they may be downloaded."""
        return self.config.hub()

    @property
    def runs_dir(self) -> Path:
        """The runs folder: where recipes' runs are kept and run names are registered."""
        return self.config.runs_dir


@dataclass(frozen=True)
class RuntimeKey:
    """A run-time key: its command-line flags and help, its default, and how a run treats it.

    ``on``: which value holds it (``settings``, ``plan``, or ``cli`` for the command line's own);
    ``recorded``: a checkpoint records it beside the options, so a resumption with another value is
    refused unless ``resumable``; ``switch``: a flag without a value."""

    flags: tuple[str, ...]
    help: str
    on: str
    default: Any = None
    parse: Callable[[str], Any] | None = None
    switch: bool = False
    recorded: bool = True
    resumable: bool = False


RUNTIME: dict[str, RuntimeKey] = {
    "out": RuntimeKey(
        ("--out",),
        "output folder (default: the recipe's run in the runs folder, keyed by the recipe); rerun to resume",
        "plan",
        parse=Path,
        resumable=True,
    ),
    "name": RuntimeKey(
        ("--name",),
        "with --out: the run's name in results and tables, registered in the runs folder so that "
        "`run --encoders NAME` finds it (default: the recipe's name, not registered)",
        "plan",
    ),
    "device": RuntimeKey(("--device",), "cpu, cuda, cuda:1 (default: cuda if available)", "settings", resumable=True),
    "threads": RuntimeKey(("--threads",), "torch CPU threads", "settings", parse=positive_int, resumable=True),
    "stop_after": RuntimeKey(
        ("--stop-after",),
        "stop this invocation after step N (resumable)",
        "settings",
        parse=positive_int,
        resumable=True,
    ),
    "keep_checkpoint": RuntimeKey(
        ("--keep-checkpoint",), "keep the resumable checkpoint", "settings", default=False, switch=True
    ),
    "overwrite": RuntimeKey(
        ("--overwrite",),
        "delete what a run wrote in --out (only that) and retrain",
        "settings",
        default=False,
        switch=True,
        resumable=True,
    ),
    "quiet": RuntimeKey(
        ("-q", "--quiet"),
        "warnings and errors only, no progress bar",
        "cli",
        default=False,
        switch=True,
        recorded=False,
    ),
}
#: what a checkpoint records of the run besides its options (the base the loop started from is the plan's)
RECORDED = ("base", *(k for k, v in RUNTIME.items() if v.recorded))
#: recorded keys that may change between a run and its resumption without changing its result
RESUMABLE = tuple(k for k, v in RUNTIME.items() if v.recorded and v.resumable)
