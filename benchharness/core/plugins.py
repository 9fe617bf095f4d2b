"""One registry for every kind of plugin, with lazy entries.

Seven kinds, one entry-point group each (``benchharness.<kind>``):

=================  ==========================================================================
``families``       a :class:`~benchharness.core.specs.Family`: an encoder spec ``type``
``postprocessors`` a ``PostProcessor`` class, or a factory ``(base, name, **params) -> Encoder``
``catalogues``     a :class:`~benchharness.core.specs.Catalogue` of named encoders
``tasks``          a :class:`~benchharness.core.task.TaskProvider` of tasks and groups
``methods``        a :class:`~benchharness.training.method.Method`: options, examples, model
``tuners``         a tuning module: ``HELP``, ``OPTIONS`` (typed), ``tune(options, settings)``
``model_kinds``    a :class:`~benchharness.core.kinds.ModelKind`: what a kind of model offers tasks
=================  ==========================================================================

The built-in plugins are declared in ``pyproject.toml`` exactly as another installed package
declares its own, so both reach the harness the same way and neither needs an edit here. An entry
is imported only when its name is asked for (or when its whole kind is listed), which keeps the
commands that compute nothing free of torch. Python code adds entries with :func:`register`; those
take precedence over installed ones of the same name.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import Any

from benchharness.core.errors import UserError

logger = logging.getLogger(__name__)

KINDS = ("families", "postprocessors", "catalogues", "tasks", "methods", "tuners", "model_kinds")
GROUP_PREFIX = "benchharness."


class PluginError(UserError):
    """A plugin entry that cannot be loaded, or a kind that does not exist."""


def load_object(target: str) -> Any:
    """The object ``module[:attribute.path]`` names, importing the module: the one place where the
    package imports a module by a computed name (plugins, and encoders named ``module:attribute``)."""
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry:
    """One named plugin: a ``module[:attribute]`` target, loaded on first use, or an object."""

    kind: str
    name: str
    target: str | None
    source: str  # the distribution that declares it, or "python" for register()
    obj: Any = field(default=None, repr=False)
    loaded: bool = False
    #: why it cannot be loaded, kept so that a module that fails is not imported (run) again
    error: PluginError | None = field(default=None, repr=False)

    def load(self) -> Any:
        """The plugin object; a plugin whose import fails in any way (a missing module, an attribute,
        a module that raises while it runs) gives one ``PluginError`` naming the entry point."""
        if self.error is not None:
            raise self.error
        if not self.loaded:
            assert self.target is not None
            try:
                self.obj = load_object(self.target)
            except Exception as exc:  # a third party's module may raise anything at import
                detail = " ".join(f"{type(exc).__name__}: {exc}".split())
                self.error = PluginError(
                    f"{self.kind} plugin {self.name!r} = {self.target!r} (from {self.source}) "
                    f"cannot be loaded: {detail}"
                )
                raise self.error from exc
            self.loaded = True
        return self.obj


class Registry:
    """Entries by kind and name, read from the installed entry points on first use."""

    def __init__(self) -> None:
        self._installed: dict[str, dict[str, Entry]] | None = None
        self._added: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}

    def _scan(self) -> dict[str, dict[str, Entry]]:
        if self._installed is None:
            from importlib.metadata import entry_points

            found: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
            for kind in KINDS:
                for ep in entry_points(group=GROUP_PREFIX + kind):
                    dist = ep.dist.name if ep.dist is not None else "?"
                    found[kind].setdefault(ep.name, Entry(kind, ep.name, ep.value, dist))
            self._installed = found
        return self._installed

    def _entries(self, kind: str) -> dict[str, Entry]:
        if kind not in KINDS:
            raise PluginError(f"unknown plugin kind {kind!r}; the kinds are {', '.join(KINDS)}")
        return {**self._scan()[kind], **self._added[kind]}

    def names(self, kind: str) -> list[str]:
        return list(self._entries(kind))

    def entry(self, kind: str, name: str) -> Entry | None:
        return self._entries(kind).get(name)

    def get(self, kind: str, name: str) -> Any:
        """The loaded plugin; ``KeyError`` when no entry has that name (callers add suggestions)."""
        entry = self.entry(kind, name)
        if entry is None:
            raise KeyError(name)
        return entry.load()

    def load_all(self, kind: str) -> dict[str, Any]:
        """Every plugin of ``kind`` that loads. One that cannot be loaded breaks only its own names:
        it is left out, with one logged warning the first time (:meth:`get` of its name raises its
        error, and :meth:`broken` says which are out), so that a broken third-party entry does not stop
        every command."""
        loaded: dict[str, Any] = {}
        for name, entry in self._entries(kind).items():
            first = entry.error is None
            try:
                loaded[name] = entry.load()
            except PluginError as exc:
                if first:
                    logger.warning("%s; its names are unavailable", exc)
        return loaded

    def broken(self, kind: str) -> dict[str, PluginError]:
        """The entries of ``kind`` that failed to load so far, with their errors."""
        return {name: entry.error for name, entry in self._entries(kind).items() if entry.error is not None}

    def register(self, kind: str, name: str, plugin: Any) -> None:
        """Add a plugin from Python: an object, or a ``"module:attribute"`` string loaded lazily."""
        self._entries(kind)  # refuses an unknown kind
        entries = self._added[kind]
        if isinstance(plugin, str):
            entries[name] = Entry(kind, name, plugin, "python")
        else:
            entries[name] = Entry(kind, name, None, "python", plugin, loaded=True)

    def unregister(self, kind: str, name: str) -> None:
        self._added[kind].pop(name, None)

    def refresh(self) -> None:
        """Read the installed entry points again (after installing a plugin package in-process)."""
        self._installed = None


#: the process-wide registry
PLUGINS = Registry()
