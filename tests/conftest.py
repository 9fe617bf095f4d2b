"""Shared fixtures: the shared data and HF cache beside the checkout, and tiny random BERTs.

Tests never touch the network: HF_HUB_OFFLINE is forced, and models are either the two MiniLMs of
the shared cache or tiny randomly initialised BERTs built from a config with the MiniLM vocabulary.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING

import pytest

from tests.helpers import DATA, HF_CACHE, SLOW_HELPERS, make_tiny_bert

if TYPE_CHECKING:
    from benchharness.core.data_root import DataRoot

#: the Ray tests' session cluster and hang guard (tests/ray_fixtures.py), started only when asked for
pytest_plugins = ["tests.ray_fixtures"]

# no per-user configuration of the machine running the tests leaks into them
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="benchharness-tests-config-")
os.environ.pop("BENCHHARNESS_CONFIG", None)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_CACHE", str(HF_CACHE))
os.environ.setdefault("BENCHHARNESS_DATA", str(DATA))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: fixtures that make a test slow wherever it asks for them: a Ray cluster, the full training corpora
SLOW_FIXTURES = frozenset({"ray_cluster", "training_corpora"})


def _names(code: CodeType) -> set[str]:
    """The global names a function's code refers to, nested functions and comprehensions included."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _names(const)
    return found


def _strings(code: CodeType) -> set[str]:
    """The string constants of a function's code, nested functions and comprehensions included."""
    found = {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _strings(const)
    return found


def names_a_checkpoint(value: object) -> bool:
    """A string that names a MiniLM (a hub id, a resolver name such as ``minilm-l3``, a spec)."""
    return isinstance(value, str) and "minilm" in value.lower()


def _uses_slow_helper(func: Callable[..., object], seen: set[int]) -> str | None:
    """The slow helper ``func`` reaches: by name, or through a function of its own module it calls."""
    code = getattr(func, "__code__", None)
    if code is None or id(code) in seen:
        return None
    seen.add(id(code))
    scope = getattr(func, "__globals__", {})
    if any(names_a_checkpoint(text) for text in _strings(code)):
        return "a MiniLM checkpoint"
    names = _names(code)
    for name in names:
        value = scope.get(name)
        if name in SLOW_HELPERS and (value is SLOW_HELPERS[name] or "tests.helpers" in names):
            return name  # imported at the top of the module, or inside the function
        if name == "subprocess" or value is subprocess or value is subprocess.run or value is subprocess.Popen:
            return "a subprocess"  # imported at the top of the module, or inside the function
        if names_a_checkpoint(value):
            return "a MiniLM checkpoint"
        if inspect.isfunction(value) and value.__module__ == func.__module__:
            reached = _uses_slow_helper(value, seen)
            if reached:
                return reached
    return None


def slow_because(item: pytest.Item) -> str | None:
    """Why a collected test is slow (what it uses), or None."""
    if not isinstance(item, pytest.Function):
        return None
    asked = SLOW_FIXTURES.intersection(item.fixturenames)
    if asked:
        return f"the {sorted(asked)[0]} fixture"
    seen: set[int] = set()
    funcs = [item.function]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        funcs.extend(d.func for d in defs if getattr(d.func, "__module__", None) == item.function.__module__)
    for func in funcs:
        reached = _uses_slow_helper(func, seen)
        if reached:
            return reached
    params = getattr(item, "callspec", None)
    if params is not None and any(names_a_checkpoint(v) for v in params.params.values()):
        return "a MiniLM checkpoint"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses what makes a test slow (``SLOW_HELPERS``, ``SLOW_FIXTURES``)."""
    for item in items:
        if slow_because(item) is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.exists():
        pytest.skip(f"shared data not found at {DATA}")
    return DATA


@pytest.fixture(scope="session")
def training_corpora(data_dir) -> DataRoot:
    """The shared data root, for a test that reads a recipe's whole training corpus (all of SNLI and
    MNLI, the dictionaries): tens of seconds, so the test is ``slow``."""
    from benchharness.core.data_root import DataRoot

    return DataRoot(data_dir)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """Folder of a tiny random BERT (2 layers, hidden 32), usable as ``hf:<folder>``."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture
def project(tmp_path, monkeypatch, data_dir):
    """A fresh project folder as the working directory: its own benchharness.toml (cache inside
    it, results in ./results) and the shared data root."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHHARNESS_DATA", str(data_dir))
    (tmp_path / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n')
    return tmp_path


@pytest.fixture
def register_plugin():
    """``register_plugin(kind, name, plugin)`` adds a plugin for one test, removed afterwards."""
    from benchharness.core.plugins import PLUGINS

    added: list[tuple[str, str]] = []

    def add(kind: str, name: str, plugin: object) -> None:
        PLUGINS.register(kind, name, plugin)
        added.append((kind, name))

    yield add
    for kind, name in added:
        PLUGINS.unregister(kind, name)
