"""Every SentEval task by name, under every classifier config: the ``transfer`` task plugin.

It registers the seven transfer tasks (``transfer``) and SentEval's other tasks: SST5 and
SICKEntailment (``split``), SICKRelatedness-sup and STSBenchmark-sup (``relatedness``), SNLI
(``snli``) and the ten probing tasks (``probing``), in groups ``senteval-extra`` and ``probing``
(``-fast`` for the prototyping config) and ``senteval-all`` (STS12-16, the seven, and all of
those), so that ``transfer`` keeps meaning what papers mean by it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from benchharness.core.task import Task, TaskProvider
from benchharness.tasks.senteval.config import (
    ALL_GROUP,
    CONFIGS,
    EXTRA_GROUP,
    PAPER_NAMES,
    PROBING_GROUP,
    PROBING_TASKS,
    TRANSFER_GROUP,
)
from benchharness.tasks.senteval.probing import ProbingTask
from benchharness.tasks.senteval.relatedness import RelatednessTask
from benchharness.tasks.senteval.snli import SNLI
from benchharness.tasks.senteval.split import SST5, SICKEntailment
from benchharness.tasks.senteval.transfer import BINARY, MRPC, SST2, TREC, BinaryTask

#: SentEval's tasks beyond the seven, in the order its task list gives them: name -> task class.
#: The relatedness regressor takes no classifier config, so those two exist once, in the default
#: and the fast groups alike (built from a config, those two from their name).
EXTRA: dict[str, Callable[..., Task]] = {
    "SST5": SST5,
    "SICKEntailment": SICKEntailment,
    "SICKRelatedness-sup": RelatednessTask,
    "STSBenchmark-sup": RelatednessTask,
    "SNLI": SNLI,
}
UNCONFIGURED = ("SICKRelatedness-sup", "STSBenchmark-sup")
#: SentEval's unsupervised STS tasks (the ``sts`` provider's), part of ``senteval-all``
STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
ALIASES = {
    "SICK-E": "SICKEntailment",
    "SICKE": "SICKEntailment",
    **{f"{name}-fast": name for name in UNCONFIGURED},
    **PAPER_NAMES,
}


def factories() -> dict[str, tuple[Callable[[], Task], tuple[str, ...]]]:
    """Every SentEval task here under every config: name -> (factory, groups). ``transfer`` is the
    seven the papers report; ``senteval-extra`` and ``probing`` the others; ``-fast`` groups hold
    the prototyping config's."""
    out: dict[str, tuple[Callable[[], Task], tuple[str, ...]]] = {}
    for cfg in CONFIGS.values():
        suffix = "" if cfg.name == "default" else f"-{cfg.name}"
        group = (TRANSFER_GROUP + suffix,)
        for name, (files, n, desc) in BINARY.items():
            out[name + suffix] = (partial(BinaryTask, name, files, n, cfg, desc), group)
        for name, cls in (("SST2", SST2), ("TREC", TREC), ("MRPC", MRPC)):
            out[name + suffix] = (partial(cls, cfg), group)
        for name, extra in EXTRA.items():
            if name in UNCONFIGURED:
                if cfg.name == "default":
                    out[name] = (partial(extra, name), (EXTRA_GROUP,))
            else:
                out[name + suffix] = (partial(extra, cfg), (EXTRA_GROUP + suffix,))
        for name in PROBING_TASKS:
            out[name + suffix] = (partial(ProbingTask, name, cfg), (PROBING_GROUP + suffix,))
    return out


def _groups(table: dict[str, tuple[Callable[[], Task], tuple[str, ...]]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for name, (_, names) in table.items():
        for group in names:
            groups.setdefault(group, []).append(name)
    for cfg in CONFIGS.values():
        suffix = "" if cfg.name == "default" else f"-{cfg.name}"
        extra = [name if name in UNCONFIGURED else name + suffix for name in EXTRA]
        groups[EXTRA_GROUP + suffix] = extra
        groups[ALL_GROUP + suffix] = [
            *STS_YEARS,
            *groups[TRANSFER_GROUP + suffix],
            *extra,
            *groups[PROBING_GROUP + suffix],
        ]
    return groups


def _provider() -> TaskProvider:
    table = factories()
    return TaskProvider(
        tasks={name: factory for name, (factory, _) in table.items()}, groups=_groups(table), aliases=ALIASES, order=20
    )


TASKS = _provider()
