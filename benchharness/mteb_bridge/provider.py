"""mteb's tasks as a ``tasks`` plugin: ``mteb:<TaskName>`` names any mteb task, run by mteb's own
evaluation (``as_task.MtebTask``), and ``mteb:<Benchmark>`` (``mteb:MTEB(eng, v2)``) every task of
an mteb benchmark, each filtered as the benchmark filters it; both take mteb's filters in brackets
(``selection``). Cheap to load: mteb is imported only when such a name is expanded or built."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from benchharness.core.task import Task, TaskProvider
from benchharness.mteb_bridge import mteb_needed
from benchharness.tasks import UnknownTaskError

PREFIX = "mteb:"
T = TypeVar("T")


def build(name: str) -> Task:
    with mteb_needed(f"task {name}"):
        import benchharness.mteb_bridge.as_task as as_task
    return _named(lambda: as_task.MtebTask(name))


def expand(name: str) -> list[str]:
    """The tasks of an mteb benchmark or filtered task, each under its canonical name."""
    with mteb_needed(f"task {name}"):
        import benchharness.mteb_bridge.selection as selection
    return _named(lambda: selection.expand(name))


def _named(make: Callable[[], T]) -> T:
    """``make()``, with mteb's complaints about a name (unknown: KeyError with close matches; a
    filter that selects nothing: SelectionError) as unknown-task errors."""
    from benchharness.mteb_bridge.selection import SelectionError

    try:
        return make()
    except (KeyError, SelectionError) as exc:
        raise UnknownTaskError(exc.args[0] if exc.args else str(exc)) from None


TASKS = TaskProvider(
    prefix=PREFIX,
    build_prefixed=build,
    expand_prefixed=expand,
    prefix_usage=f"any mteb task or benchmark as {PREFIX}<Name>, filtered as "
    f"{PREFIX}<Name>[languages=eng; splits=test]",
    order=90,
)
