"""Tasks by name: the selection language of ``--tasks`` over every installed ``tasks`` plugin.

Each task-family module here (``sts``, ``transfer``, ``qqp``, ``askubuntu``) exposes a
:class:`~benchharness.core.task.TaskProvider` (or a function returning one, re-read at each
lookup: tasks declared in the configuration); they, and any other package's, are found through the
plugin registry (``benchharness.core.plugins``), so this package imports none of its own modules.
A selection is a comma list of task names, group names (``sts``, ``transfer``) and aliases
(``STS-B``), expanded in order without repeats; unknown names fail with the close matches.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from benchharness.core.errors import UserError
from benchharness.core.plugins import PLUGINS
from benchharness.core.task import Task, TaskProvider


class UnknownTaskError(UserError, KeyError):
    """A task or group name that no installed task plugin knows."""


@dataclass(frozen=True)
class TaskTable:
    """Every installed task provider merged: names, groups and aliases, in the providers' order."""

    providers: dict[str, TaskProvider]

    @property
    def factories(self) -> dict[str, object]:
        return {n: f for p in self.providers.values() for n, f in p.tasks.items()}

    @property
    def groups(self) -> dict[str, list[str]]:
        merged: dict[str, list[str]] = {}
        for provider in self.providers.values():
            for group, names in provider.groups.items():
                merged.setdefault(group, []).extend(n for n in names if n not in merged.get(group, []))
        return merged

    @property
    def aliases(self) -> dict[str, str]:
        return {a: n for p in self.providers.values() for a, n in p.aliases.items()}

    def prefixed(self, name: str) -> TaskProvider | None:
        for provider in self.providers.values():
            if provider.prefix and name.startswith(provider.prefix) and name[len(provider.prefix):].strip():
                return provider
        return None


def catalogue() -> TaskTable:
    loaded = {name: plugin() if callable(plugin) else plugin for name, plugin in PLUGINS.load_all("tasks").items()}
    providers = sorted(loaded.items(), key=lambda item: item[1].order)
    return TaskTable(dict(providers))


def names() -> list[str]:
    """Every task name, in the providers' order."""
    return list(catalogue().factories)


def groups() -> dict[str, list[str]]:
    return catalogue().groups


def resolve(selection: str | list[str]) -> list[str]:
    """Expand a comma list of task and group names, keeping order, failing with suggestions."""
    return _expand(catalogue(), selection)


def select(selection: str | list[str]) -> list[Task]:
    """New, unloaded tasks of a selection, in order: every name expanded and built against one
    reading of the installed providers."""
    cat = catalogue()
    return [_build(cat, name) for name in _expand(cat, selection)]


def _expand(cat: TaskTable, selection: str | list[str]) -> list[str]:
    factories, group_table, aliases = cat.factories, cat.groups, cat.aliases
    items = selection.split(",") if isinstance(selection, str) else selection
    out: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        item = aliases.get(item, aliases.get(item.upper(), item))
        prefixed = cat.prefixed(item)
        if prefixed is not None:
            prefix = prefixed.prefix or ""
            expanded = [prefix + item[len(prefix):].strip()]
        elif item in group_table:
            expanded = group_table[item]
        elif item in factories:
            expanded = [item]
        else:
            lookup = {n.lower(): n for n in [*factories, *group_table]}
            if item.lower() in lookup:
                expanded = group_table.get(lookup[item.lower()], [lookup[item.lower()]])
            else:
                close = difflib.get_close_matches(item, [*factories, *group_table], n=5, cutoff=0.5)
                hint = f" Did you mean: {', '.join(close)}?" if close else ""
                extra = "".join(f"; {p.prefix_usage}" for p in cat.providers.values() if p.prefix_usage)
                raise UnknownTaskError(f"unknown task {item!r}.{hint} Groups: {', '.join(group_table)}; "
                                       f"tasks: {', '.join(factories)}{extra}")
        out.extend(n for n in expanded if n not in out)
    return out


def get(name: str) -> Task:
    """A new, unloaded task by name (or alias)."""
    cat = catalogue()
    return _build(cat, _expand(cat, name)[0])


def _build(cat: TaskTable, resolved: str) -> Task:
    provider = cat.prefixed(resolved)
    if provider is not None and provider.build_prefixed is not None:
        return provider.build_prefixed(resolved)
    return cat.factories[resolved]()  # type: ignore[operator]
