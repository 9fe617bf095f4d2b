"""mteb's benchmarks and tasks by name, with mteb's filters, as benchharness task names.

A selection is an mteb task or benchmark name, optionally followed by filters in square brackets,
the arguments of mteb's ``get_task``/``get_tasks``/``get_benchmark`` filtering::

    MTEB(eng, v2)                                  every task of the benchmark, as mteb runs it
    MTEB(Multilingual, v2)[languages=deu,fra]      its tasks that have German or French subsets
    STS22.v2[languages=eng; exclusive]             subsets whose every language is English
    MTOPDomainClassification[subsets=en,de; splits=test]

``languages`` are ISO 639-3 codes, optionally with a script (``eng``, ``eng-Latn``); ``scripts``
ISO 15924 codes; ``subsets`` the dataset's Hugging Face subsets; ``splits`` its evaluation splits;
``exclusive`` keeps only subsets whose every language is one asked for (mteb's
``exclusive_language_filter``). A benchmark's tasks carry the benchmark's own filters (English
subsets, test splits), and the given ones narrow them further.

Each task selected gets one name that says exactly what is evaluated (``canonical``): its mteb
name when every subset and split of the task is, else the name with the subsets and splits kept
(``mteb:STS22.v2[subsets=en]``). A task reached through a benchmark and the same filtering written
by hand are therefore one task, stored once, and ``task`` rebuilds it from that name alone.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import mteb
from mteb.abstasks import AbsTask

from benchharness.core.lists import split_outside_brackets
from benchharness.mteb_bridge import evaluate
from benchharness.mteb_bridge.evaluate import PREFIX, task_name

#: the filter keys, as written in a selection
KEYS = ("languages", "scripts", "subsets", "splits", "exclusive")
_FILTERED = re.compile(r"(?P<name>.*?)\s*\[(?P<filters>[^\[\]]*)\]\s*")


class SelectionError(ValueError):
    """A selection mteb cannot satisfy: a malformed filter, or one that leaves nothing to evaluate."""


@dataclass(frozen=True)
class Selection:
    name: str  # an mteb task or benchmark name
    languages: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    subsets: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()
    exclusive: bool = False

    @property
    def filtered(self) -> bool:
        return bool(self.languages or self.scripts or self.subsets or self.splits)


def parse(spec: str) -> Selection:
    """``Name[key=v,v; key=v; exclusive]`` (``mteb:`` prefix optional) as a ``Selection``."""
    spec = task_name(spec.strip())
    match = _FILTERED.fullmatch(spec)
    if match is None:
        if "[" in spec or "]" in spec:
            raise SelectionError(f"mteb selection {spec!r}: filters go in one [...] at the end, as Name[languages=eng]")
        return Selection(spec)
    values: dict[str, tuple[str, ...]] = {}
    exclusive = False
    for part in (p.strip() for p in match["filters"].split(";")):
        if not part:
            continue
        key, sep, value = (s.strip() for s in part.partition("="))
        if key == "exclusive" and not sep:
            exclusive = True
            continue
        if key not in KEYS or key == "exclusive" or not sep:
            raise SelectionError(
                f"mteb selection {spec!r}: {part!r} is not a filter; write key=value,value with keys "
                f"{', '.join(KEYS[:-1])}, or the word exclusive, separated by ';'"
            )
        items = tuple(v.strip() for v in split_outside_brackets(value) if v.strip())
        if not items:
            raise SelectionError(f"mteb selection {spec!r}: {key}= names no value")
        values[key] = items
    return Selection(match["name"], exclusive=exclusive, **values)


def is_benchmark(name: str) -> bool:
    """Whether mteb knows ``name`` as a benchmark (or one of its aliases) rather than as a task."""
    try:
        mteb.get_benchmark(name)
    except KeyError:
        return False
    return True


def benchmark_tasks(name: str) -> list[AbsTask]:
    """The tasks of an mteb benchmark, filtered as the benchmark filters them."""
    return list(mteb.get_benchmark(name).tasks)


def tasks_of(selection: Selection) -> list[AbsTask]:
    """The mteb tasks a selection stands for, each filtered; a filter that leaves a task with
    nothing to evaluate drops it from a benchmark and fails for a single task."""
    if is_benchmark(selection.name):
        found = [t for t in (_narrowed(task, selection) for task in benchmark_tasks(selection.name)) if t is not None]
        if not found:
            raise SelectionError(f"mteb benchmark {selection.name}: no task is left by the filters of this selection")
        return found
    try:
        task = evaluate.get_task(selection.name)
    except KeyError:
        raise KeyError(unknown(selection.name)) from None
    narrowed = _narrowed(task, selection)
    if narrowed is None:
        raise SelectionError(
            f"mteb task {selection.name}: the filters leave nothing to evaluate; its subsets are "
            f"{', '.join(task.hf_subsets)} and its splits {', '.join(task.eval_splits)}"
        )
    return [narrowed]


def unknown(name: str) -> str:
    """Why ``name`` selects nothing, with mteb's benchmarks and tasks closest to it."""
    known = [b.name for b in mteb.get_benchmarks()] + [
        t.metadata.name for t in mteb.get_tasks(exclude_superseded=False)
    ]
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    hint = f"did you mean: {', '.join(close)}?" if close else "`benchharness list tasks --mteb` lists them"
    return f"unknown mteb task {name!r}: mteb knows no task or benchmark by that name; {hint}"


def _narrowed(task: AbsTask, selection: Selection) -> AbsTask | None:
    """A copy of ``task`` with the selection's filters applied on top of its own, or None when no
    subset or split is left."""
    subsets = [s for s in task.hf_subsets if not selection.subsets or s in selection.subsets]
    splits = [s for s in task.eval_splits if not selection.splits or s in selection.splits]
    if not subsets or not splits:
        return None
    task = copy.deepcopy(task)  # mteb's benchmark registry hands out shared task objects
    if selection.languages or selection.scripts or selection.exclusive:
        try:
            task.filter_languages(
                list(selection.languages) or None,
                list(selection.scripts) or None,
                hf_subsets=subsets,
                exclusive_language_filter=selection.exclusive,
            )
        except ValueError as exc:
            if str(exc).startswith("No subsets were found"):
                return None  # no subset in those languages
            raise SelectionError(f"mteb task {task.metadata.name}: {exc}") from None  # a code mteb does not know
    else:
        task.hf_subsets = subsets
    task.filter_eval_splits(splits)
    return task


def canonical(task: AbsTask) -> str:
    """``mteb:<Name>``, with ``[subsets=...; splits=...]`` when the task evaluates fewer subsets or
    splits than the whole task: the name of exactly what is evaluated."""
    whole = evaluate.get_task(task.metadata.name)
    filters = []
    if list(task.hf_subsets) != list(whole.hf_subsets):
        filters.append("subsets=" + ",".join(task.hf_subsets))
    if list(task.eval_splits) != list(whole.eval_splits):
        filters.append("splits=" + ",".join(task.eval_splits))
    return PREFIX + task.metadata.name + (f"[{'; '.join(filters)}]" if filters else "")


def expand(spec: str) -> list[str]:
    """The canonical task names of a selection, in the benchmark's order."""
    return [canonical(task) for task in tasks_of(parse(spec))]


def task(name: str) -> AbsTask:
    """The one mteb task a canonical name (or any single-task selection) stands for."""
    selection = parse(name)
    if is_benchmark(selection.name):
        raise SelectionError(f"{name} is an mteb benchmark: select it to run its tasks, each under its own name")
    (found,) = tasks_of(selection)
    return found


def task_types(tasks: Sequence[AbsTask]) -> dict[str, str]:
    """Each task's canonical name and mteb task type (what mteb's Mean(TaskType) groups by)."""
    return {canonical(t): str(t.metadata.type) for t in tasks}
