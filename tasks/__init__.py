"""Tasks by name: the selection language of ``--tasks`` over every installed ``tasks`` plugin.

Each task-family module here (``sts``, ``transfer``, ``qqp``, ``askubuntu``) exposes a
:class:`~benchharness.core.task.TaskProvider`, or a function of the run's configuration returning
one, called at each lookup (tasks declared in the configuration's ``[tasks.*]``); they, and any
other package's, are found through the plugin registry (``benchharness.core.plugins``), so this
package imports none of its own modules.
A selection is a comma list of task names, group names (``sts``, ``transfer``) and aliases
(``STS-B``), expanded in order without repeats; unknown names fail with the close matches. Commas
inside brackets belong to the name (``mteb:MTEB(eng, v2)``, ``mteb:STS22[languages=eng,deu]``), and a
prefixed name may stand for several tasks (an mteb benchmark).
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field

from benchharness.core.errors import UserError
from benchharness.core.lists import split_outside_brackets
from benchharness.core.plugins import PLUGINS
from benchharness.core.settings import Config
from benchharness.core.task import Task, TaskProvider

logger = logging.getLogger(__name__)


class UnknownTaskError(UserError, KeyError):
    """A task or group name that no installed task plugin knows."""


@dataclass(frozen=True)
class TaskTable:
    """Every installed task provider merged: names, groups and aliases, in the providers' order."""

    providers: dict[str, TaskProvider]
    #: the providers left out, by plugin name, with why
    broken: dict[str, str] = field(default_factory=dict)

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
    def means(self) -> dict[str, list[str]]:
        """The groups whose mean is a score of its own (``TaskProvider.means``), with their tasks."""
        groups = self.groups
        return {g: groups[g] for p in self.providers.values() for g in p.means if g in groups}

    @property
    def aliases(self) -> dict[str, str]:
        return {a: n for p in self.providers.values() for a, n in p.aliases.items()}

    def prefixed(self, name: str) -> TaskProvider | None:
        for provider in self.providers.values():
            if provider.prefix and name.startswith(provider.prefix) and name[len(provider.prefix) :].strip():
                return provider
        return None


def catalogue(config: Config | None = None) -> TaskTable:
    """Every task provider that loads; a provider function is given ``config`` (None: the
    configuration declares no task). A broken one (its plugin fails to import, its provider
    function raises, or it gives no ``TaskProvider``) breaks only its own names: it is left out
    with a warning, once per process and problem, and named in the unknown-task error."""
    providers: dict[str, TaskProvider] = {}
    loaded = PLUGINS.load_all("tasks")
    broken = {name: str(exc) for name, exc in PLUGINS.broken("tasks").items()}
    for name, plugin in loaded.items():
        try:
            provider = plugin(config) if callable(plugin) else plugin
        except Exception as exc:
            broken[name] = f"tasks plugin {name!r}: {' '.join(f'{type(exc).__name__}: {exc}'.split())}"
            warn_once(f"{broken[name]}; its tasks are unavailable")
            continue
        if not isinstance(provider, TaskProvider):
            broken[name] = f"tasks plugin {name!r} gives a {type(provider).__name__}, not a TaskProvider"
            warn_once(f"{broken[name]}; its tasks are unavailable")
            continue
        providers[name] = provider
    return TaskTable(dict(sorted(providers.items(), key=lambda item: item[1].order)), broken)


#: the warnings given already: the catalogue is read several times per command
_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning the first time in this process: providers are re-read at each lookup."""
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning("%s", message)


def names(config: Config | None = None) -> list[str]:
    """Every task name, in the providers' order."""
    return list(catalogue(config).factories)


def groups(config: Config | None = None) -> dict[str, list[str]]:
    return catalogue(config).groups


def means(config: Config | None = None) -> dict[str, list[str]]:
    """The groups whose unweighted mean is reported as a score, each with its tasks (``TaskTable.means``)."""
    return catalogue(config).means


def resolve(selection: str | list[str], config: Config | None = None) -> list[str]:
    """Expand a comma list of task and group names, keeping order, failing with suggestions."""
    return _expand(catalogue(config), selection)


def select(selection: str | list[str], config: Config | None = None) -> list[Task]:
    """New, unloaded tasks of a selection, in order: every name expanded and built against one
    reading of the installed providers."""
    cat = catalogue(config)
    return [_build(cat, name) for name in _expand(cat, selection)]


def _expand(cat: TaskTable, selection: str | list[str]) -> list[str]:
    factories, group_table, aliases = cat.factories, cat.groups, cat.aliases
    try:
        items = split_outside_brackets(selection) if isinstance(selection, str) else selection
    except ValueError as exc:
        raise UnknownTaskError(f"task selection: {exc}") from None
    out: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        item = aliases.get(item, aliases.get(item.upper(), item))
        prefixed = cat.prefixed(item)
        if prefixed is not None:
            prefix = prefixed.prefix or ""
            expanded = [prefix + item[len(prefix) :].strip()]
            if prefixed.expand_prefixed is not None:
                expanded = prefixed.expand_prefixed(expanded[0])
        elif item in group_table:
            expanded = group_table[item]
        elif item in factories:
            expanded = [item]
        else:
            lookup = {n.lower(): n for n in [*factories, *group_table]}
            refused = {n: why for p in cat.providers.values() for n, why in p.refused.items()}
            if item in refused:
                raise UnknownTaskError(f"task {item!r} is declared but was refused: {refused[item]}")
            if item.lower() in lookup:
                expanded = group_table.get(lookup[item.lower()], [lookup[item.lower()]])
            else:
                close = difflib.get_close_matches(item, [*factories, *group_table], n=5, cutoff=0.5)
                hint = f" Did you mean: {', '.join(close)}?" if close else ""
                extra = "".join(f"; {p.prefix_usage}" for p in cat.providers.values() if p.prefix_usage)
                extra += "".join(f"; unavailable: {why}" for why in cat.broken.values())
                raise UnknownTaskError(
                    f"unknown task {item!r}.{hint} Groups: {', '.join(group_table)}; "
                    f"tasks: {', '.join(factories)}{extra}"
                )
        out.extend(n for n in expanded if n not in out)
    return out


def get(name: str, config: Config | None = None) -> Task:
    """A new, unloaded task by name (or alias); ``config``: whose ``[tasks.*]`` are known too."""
    cat = catalogue(config)
    return _build(cat, _expand(cat, name)[0])


def _build(cat: TaskTable, resolved: str) -> Task:
    provider = cat.prefixed(resolved)
    if provider is not None and provider.build_prefixed is not None:
        return provider.build_prefixed(resolved)
    return cat.factories[resolved]()  # type: ignore[operator]
