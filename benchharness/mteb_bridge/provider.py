"""mteb's tasks as a ``tasks`` plugin: ``mteb:<TaskName>`` names any mteb task, run by mteb's own
evaluation (``as_task.MtebTask``). Cheap to load: mteb is imported only when such a task is built."""

from __future__ import annotations

from benchharness.core.task import Task, TaskProvider
from benchharness.mteb_bridge import mteb_needed
from benchharness.tasks import UnknownTaskError

PREFIX = "mteb:"


def build(name: str) -> Task:
    with mteb_needed(f"task {name}"):
        import benchharness.mteb_bridge.as_task as as_task
    try:
        return as_task.MtebTask(name)
    except KeyError as exc:  # mteb does not know the name; its message lists close ones
        raise UnknownTaskError(exc.args[0] if exc.args else name) from None


TASKS = TaskProvider(prefix=PREFIX, build_prefixed=build, prefix_usage=f"any mteb task as {PREFIX}<TaskName>", order=90)
