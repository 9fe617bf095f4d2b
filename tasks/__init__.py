"""Task registry: every task by name, and the groups (``sts``...) that select several at once."""

from __future__ import annotations

import difflib
from typing import Callable

from benchharness.readers import STS_YEARS
from benchharness.task import Task
from tasks import sts

FACTORIES: dict[str, Callable[[], Task]] = {
    **{year: (lambda y=year: sts.STSYear(y)) for year in STS_YEARS},
    "STSBenchmark": lambda: sts.stsb("test"),
    "SICKRelatedness": lambda: sts.sick("test"),
    "STSBenchmark-dev": lambda: sts.stsb("dev"),
    "STSBenchmark-raw": lambda: sts.stsb("test", raw=True),
    "SICKRelatedness-trial": lambda: sts.sick("trial"),
    "SICKRelatedness-mteb": sts.sick_mteb,
}

#: ``mteb:<TaskName>`` selects an mteb task, run by mteb's own evaluation through the mteb bridge
#: (which the CLI wires in; mteb's task names are checked when the task is built)
MTEB_PREFIX = "mteb:"

GROUPS: dict[str, list[str]] = {
    "sts": ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"],
}

#: other spellings of task names: the leaderboard's column headers and the published tables' keys
ALIASES: dict[str, str] = {"STS-B": "STSBenchmark", "STSB": "STSBenchmark", "SICK-R": "SICKRelatedness",
                           "SICKR": "SICKRelatedness"}


class UnknownTaskError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def register(name: str, factory: Callable[[], Task], groups: tuple[str, ...] = ()) -> None:
    """Add a task (used by the task-family modules)."""
    FACTORIES[name] = factory
    for group in groups:
        GROUPS.setdefault(group, []).append(name)


def resolve(selection: str | list[str]) -> list[str]:
    """Expand a comma list of task and group names, keeping order, failing with suggestions."""
    items = selection.split(",") if isinstance(selection, str) else selection
    names: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        item = ALIASES.get(item, ALIASES.get(item.upper(), item))
        if item.startswith(MTEB_PREFIX) and item[len(MTEB_PREFIX):].strip():
            expanded = [MTEB_PREFIX + item[len(MTEB_PREFIX):].strip()]
        elif item in GROUPS:
            expanded = GROUPS[item]
        elif item in FACTORIES:
            expanded = [item]
        else:
            lookup = {n.lower(): n for n in [*FACTORIES, *GROUPS]}
            if item.lower() in lookup:
                expanded = GROUPS.get(lookup[item.lower()], [lookup[item.lower()]])
            else:
                close = difflib.get_close_matches(item, [*FACTORIES, *GROUPS], n=5, cutoff=0.5)
                hint = f" Did you mean: {', '.join(close)}?" if close else ""
                raise UnknownTaskError(
                    f"unknown task {item!r}.{hint} Groups: {', '.join(GROUPS)}; "
                    f"tasks: {', '.join(FACTORIES)}; any mteb task as {MTEB_PREFIX}<TaskName>"
                )
        names.extend(n for n in expanded if n not in names)
    return names


def get(name: str) -> Task:
    resolved = resolve(name)[0]
    if resolved.startswith(MTEB_PREFIX):  # tasks never import the bridge (it imports mteb)
        raise UnknownTaskError(f"{resolved} is an mteb task: benchharness.mteb_bridge.task.MtebTask builds it "
                               "(as `benchharness run` does)")
    return FACTORIES[resolved]()

# Task families register themselves on import (after ``register`` exists).
from tasks import askubuntu, qqp, transfer  # noqa: E402,F401
