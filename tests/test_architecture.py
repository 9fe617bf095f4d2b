"""The import graph of issue #11: which room may import which, and what the quick commands load.

- ``encoders`` (families, post-processors, methods) imports neither ``tasks`` nor the runner nor
  the core's orchestration (CLI, tuning);
- ``tasks`` imports from the core only what it offers tasks (data, readers, metrics, ranking, the
  task contract, device choice), and nothing of ``encoders``;
- in the core, only the composition roots (the CLI, the tuners) name ``tasks``; only the tuners
  import ``encoders`` modules (the registry finds its plugins by discovery, not by import);
- ``benchharness list ...``, ``leaderboard``, ``data status`` and ``--help`` load no torch,
  transformers, sentence-transformers, scikit-learn or scipy.

Imports are read with ``ast`` (module level and inside functions alike), so a lazy import counts.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn", "scipy")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every absolute module an import statement in the file names (``from a.b import c``: a.b, a.b.c)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _modules(package: str, exclude: str | None = None) -> dict[str, set[str]]:
    files = sorted((ROOT / package).rglob("*.py"))
    return {_module_name(f): _imports(f) for f in files
            if exclude is None or not _module_name(f).startswith(exclude)}


def _names(imports: set[str], prefixes: tuple[str, ...]) -> set[str]:
    return {m for m in imports if any(m == p or m.startswith(p + ".") for p in prefixes)}


ENCODERS_MUST_NOT = ("tasks", "benchharness.runner", "benchharness.cli", "benchharness.tuning")


def test_encoder_families_and_postprocessors_import_no_tasks_nor_runner():
    bad = {m: sorted(_names(imps, ENCODERS_MUST_NOT))
           for m, imps in _modules("encoders", exclude="encoders.methods").items()}
    assert {m: v for m, v in bad.items() if v} == {}


def test_training_methods_import_no_tasks_nor_runner():
    bad = {m: sorted(_names(imps, ENCODERS_MUST_NOT))
           for m, imps in _modules("encoders").items() if m.startswith("encoders.methods")}
    assert {m: v for m, v in bad.items() if v} == {}


TASKS_MAY_USE = ("benchharness.data", "benchharness.readers", "benchharness.metrics", "benchharness.ranking",
                 "benchharness.task", "benchharness.devices")


def test_tasks_import_only_what_the_core_offers_them():
    bad = {}
    for module, imps in _modules("tasks").items():
        core = {m for m in _names(imps, ("benchharness",)) if not _names({m}, TASKS_MAY_USE)}
        # ``from benchharness.data import DataError`` also names benchharness.data.DataError: allowed
        wrong = sorted(core | _names(imps, ("encoders",)))
        if wrong:
            bad[module] = wrong
    assert bad == {}


def test_core_reaches_tasks_and_encoders_only_from_its_composition_roots():
    core = _modules("benchharness")
    names_tasks = sorted(m for m, imps in core.items() if _names(imps, ("tasks",)))
    imports_encoders = sorted(m for m, imps in core.items() if _names(imps, ("encoders",)))
    # the composition roots: the CLI, tuning a post-processor and evaluating a training run on dev
    assert names_tasks == ["benchharness.cli", "benchharness.dev_eval", "benchharness.tuning.grid"]
    # training orchestration: recipes resolve a method's options, on_demand trains a missing recipe
    roots = ("benchharness.tuning", "benchharness.dev_eval", "benchharness.training_cli", "benchharness.recipes",
             "benchharness.on_demand")
    assert all(m.startswith(roots) for m in imports_encoders), imports_encoders
    assert not _names(core["benchharness.runner"], ("tasks", "encoders"))


def test_encoder_families_register_themselves():
    from benchharness.registry import families

    assert {"hf", "st", "glove"} <= set(families())


@pytest.mark.parametrize("argv", [["list", "tasks"], ["list", "encoders"], ["leaderboard"], ["data", "status"],
                                  ["--help"]])
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
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
