"""The layers of the package, and what the quick commands load.

Each module is placed in a room (a folder of ``benchharness``; ``encoders/`` and ``tasks/`` install
as ``benchharness.encoders`` and ``benchharness.tasks``), each room in a layer, and every import
must point to a lower layer or stay in its room; the few same-layer arrows between rooms are listed
here with their reason. Imports are read with ``ast`` wherever they appear: at module level, inside
functions, under ``TYPE_CHECKING``, ``importlib.import_module`` calls with literal or
``f"{__name__}..."`` names, and string constants that name a module of the package (tables of lazy
imports). Plugins are wired through entry points (``pyproject.toml``), which are
checked to sit in the room of their kind. The import graph has no cycle at all.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn", "scipy")

#: rooms from the bottom layer up
LAYERS: list[tuple[str, ...]] = [
    ("core",),
    ("data", "scoring"),
    ("encoders", "tasks"),
    ("evaluation",),
    ("training", "tuning", "reporting", "mteb_bridge"),
    ("cli", ""),  # "": the package's own __init__, which exports the Python API (loaded on first use)
]
#: same-layer arrows between rooms, each with its reason
SIDEWAYS = {
    ("tuning", "training"): "a tuner selects on the dev task training selects on (dev_eval.DEV_TASK)",
    ("reporting", "mteb_bridge"): "the leaderboard gives mteb tasks (mteb:<Name>) their own section",
}
#: where each kind of plugin may live
PLUGIN_ROOMS = {
    "families": {"encoders"},
    "postprocessors": {"encoders"},
    "methods": {"training"},
    "catalogues": {"encoders", "training"},
    "tasks": {"tasks", "mteb_bridge"},
    "tuners": {"tuning"},
    "model_kinds": {"evaluation"},
}


def module_files() -> dict[str, Path]:
    """Every module of the installed package by import name, from the source folders."""
    out = {}
    for folder, prefix in (
        ("benchharness", "benchharness"),
        ("encoders", "benchharness.encoders"),
        ("tasks", "benchharness.tasks"),
    ):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join((prefix, *parts))] = path
    return out


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``module`` imports, wherever in the file (see the module docstring)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            submodules = {f"{base}.{a.name}" for a in node.names} & known
            names.update(submodules)
            if len(submodules) < len(node.names):  # some names are attributes of ``base`` itself
                names.add(base)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
        ):
            arg = node.args[0]
            if isinstance(arg, ast.Constant):
                names.add(arg.value)
            elif (
                isinstance(arg, ast.JoinedStr)
                and isinstance(arg.values[0], ast.FormattedValue)
                and getattr(arg.values[0].value, "id", None) == "__name__"
            ):
                names.update(m for m in known if m.startswith(module + "."))
            else:  # the plugin loader, and the package's lazy exports (their module names are literals below)
                assert module in ("benchharness.core.plugins", "benchharness"), (
                    f"{module}: import_module of a computed name"
                )
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value and node.value in known
        ):
            names.add(node.value)  # a module named by a string constant, e.g. in a table of lazy imports
    out = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> int:
    return next(i for i, rooms in enumerate(LAYERS) if room(module) in rooms)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    files = module_files()
    return {m: imports(m, p, set(files)) for m, p in files.items()}


def test_every_module_has_a_room(graph):
    rooms = {r for rs in LAYERS for r in rs}
    assert sorted(m for m in graph if room(m) not in rooms) == []


def test_each_layer_imports_only_from_below(graph):
    wrong = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if layer(t) > layer(m) or (layer(t) == layer(m) and room(t) != room(m) and (room(m), room(t)) not in SIDEWAYS)
    )
    assert wrong == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; components of more than one module are import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles(graph):
    assert strongly_connected(graph) == []


def test_the_circle_finder_finds_circles():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_a_lazy_or_type_only_import_counts(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from benchharness.cli import x\n"
        "def f():\n    import benchharness.evaluation.runner\n"
        "    importlib.import_module('benchharness.training.recipes')\n"
    )
    known = {"benchharness.cli", "benchharness.evaluation.runner", "benchharness.training.recipes"}
    assert imports("benchharness.core.probe", probe, known) == known


def test_plugins_live_in_the_room_of_their_kind(graph):
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    wrong = []
    for group, entries in entry_points.items():
        kind = group.removeprefix("benchharness.")
        for name, target in entries.items():
            module = target.partition(":")[0]
            if module not in graph or room(module) not in PLUGIN_ROOMS[kind]:
                wrong.append(f"{kind} {name} = {target}")
    assert wrong == []


def test_the_runner_knows_no_plugin_family(graph):
    runner = graph["benchharness.evaluation.runner"]
    assert not {t for t in runner if room(t) in ("encoders", "tasks")}


#: the leaderboard's marks are paired tests on stored per-item outputs: numpy and scipy, never a model
ALLOWED = {"leaderboard": {"numpy", "scipy"}}


@pytest.mark.parametrize(
    "argv", [["list", "tasks"], ["list", "encoders"], ["leaderboard"], ["data", "status"], ["--help"]]
)
def test_quick_commands_import_no_heavy_library(argv):
    script = f"""
import contextlib, io, json, sys
from benchharness.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))))
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) <= ALLOWED.get(argv[0], set())


# ------------------------------------------------------------------------------------------------
# the drawn map of docs/ARCHITECTURE.md, generated here from the folders and the layers above

DOC = ROOT / "docs" / "ARCHITECTURE.md"
MAP_BEGIN = "<!-- rooms: generated by tests/unit/test_architecture.py; do not edit by hand -->"
MAP_END = "<!-- end of rooms -->"
WIDTH = 100


def _folder(room_name: str) -> str:
    return {"": "benchharness/__init__.py", "encoders": "encoders/", "tasks": "tasks/"}.get(
        room_name, f"benchharness/{room_name}/"
    )


def _packages(room_name: str, modules: list[str]) -> dict[str, list[str]]:
    """A room's modules by package, relative to the room ("": the room's own), packages not listed
    among the modules they hold."""
    prefix = f"benchharness.{room_name}."
    packages = {m for m in modules for other in modules if other.startswith(m + ".")}
    out: dict[str, list[str]] = {}
    for module in sorted(modules):
        if module.startswith(prefix) and module not in packages:
            package, _, name = module[len(prefix) :].rpartition(".")
            out.setdefault(package.replace(".", "/") + "/" if package else "", []).append(name)
    return dict(sorted(out.items()))


def _wrapped(head: str, words: list[str]) -> list[str]:
    lines, line = [], head
    for word in words:
        piece = word if line == head else " " + word
        if len(line) + len(piece) > WIDTH and line != head:
            lines.append(line)
            line, piece = " " * len(head), word
        line += piece
    return [*lines, line]


def room_map() -> str:
    """The layers from the top, each room with its folder and modules, and the sideways arrows."""
    modules = list(module_files())
    out = ["```text"]
    for number, rooms in reversed(list(enumerate(LAYERS, 1))):
        for i, room_name in enumerate(rooms):
            head = f"{number if i == 0 else ' '}  {_folder(room_name):<27}"
            own = {"": ["the", "Python", "API", "(evaluate,", "train,", "compare,", "...)"]}
            for package, names in (_packages(room_name, modules) if room_name else own).items():
                words = [f"{package}:"] if package else []
                listed = names if not room_name else [n + "," for n in names[:-1]] + names[-1:]
                out += _wrapped(head, words + listed)
                head = " " * len(head)
        out.append("")
    out += [f"sideways: {a} -> {b}: {why}" for (a, b), why in SIDEWAYS.items()]
    out.append("```")
    return "\n".join(line.rstrip() for line in out)


def test_the_drawn_map_of_the_rooms_is_current():
    text = DOC.read_text()
    assert MAP_BEGIN in text and MAP_END in text, f"{DOC} has lost its map markers"
    drawn = text.split(MAP_BEGIN)[1].split(MAP_END)[0].strip()
    assert drawn == room_map(), "the rooms changed: python tests/unit/test_architecture.py writes the new map"


#: a path or dotted name in backquotes that names a module of the package (``core/task.py``,
#: ``evaluation/runner.py``, ``core.specs.BuildContext``)
_REFERENCE = re.compile(r"`([a-z_]+(?:[./][A-Za-z_]+)+(?:\.py)?)`")


def _resolve(reference: str, files: dict[str, Path]) -> bool:
    """Whether a reference names a file of the checkout, or a module of the package (and the name
    defined in it, if any: a def, a class, an assignment, or a lazy export's quoted name)."""
    if (ROOT / reference).is_file() or (ROOT / "benchharness" / reference).is_file():
        return True
    path = reference.removesuffix(".py").replace("/", ".")
    parts = [p for p in path.split(".") if p != "__init__"]
    roots = ("",) if parts[0] == "benchharness" else ("benchharness",)
    for root in roots:
        for cut in range(len(parts), 0, -1):
            module = ".".join(p for p in (root, *parts[:cut]) if p)
            if module in files:
                names = parts[cut:]
                if reference.endswith(".py"):
                    return not names
                source = files[module].read_text()
                defined = r"\b(def|class)\s+{n}\b|^\s*{n}\s*[:=]|\"{n}\"\s*:"
                return all(re.search(defined.format(n=n), source, re.M) for n in names)
    return False


def test_every_module_the_architecture_names_exists():
    files = module_files()
    rooms = {r for rs in LAYERS for r in rs if r}
    text = DOC.read_text()
    named = {m for m in _REFERENCE.findall(text) if m.split("/")[0].split(".")[0] in rooms | {"benchharness"}}
    assert len(named) > 40  # the text names its modules; this test reads them
    assert sorted(n for n in named if not _resolve(n, files)) == []


if __name__ == "__main__":  # rewrite the map in docs/ARCHITECTURE.md
    before, rest = DOC.read_text().split(MAP_BEGIN)
    DOC.write_text(f"{before}{MAP_BEGIN}\n{room_map()}\n{MAP_END}{rest.split(MAP_END)[1]}")
