"""The methods and the loop know no evaluation task: nothing under ``training/methods`` and none of
the loop's modules imports ``tasks``, the evaluation, the dev evaluator or the command line; a run
gets its dev evaluation as a callback, from its settings."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = (
    "benchharness.tasks",
    "benchharness.evaluation",
    "benchharness.training.dev_eval",
    "benchharness.cli",
)
#: the loop and what it is made of (the rest of ``training/`` orchestrates: recipes, the estimates,
#: ``train_with`` and its edges, the dev evaluator itself)
LOOP = (
    "base_model",
    "data_parallel",
    "harness",
    "loop",
    "manifest",
    "method",
    "optim",
    "options",
    "outputs",
    "plan",
    "resume",
    "settings",
    "train_data",
)


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_imported_modules_sees_lazy_and_from_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from benchharness import tasks\n    from benchharness.evaluation import runner\n")
    assert {"benchharness.tasks", "benchharness.evaluation.runner"} <= imported_modules(probe)


def test_training_methods_and_the_loop_import_no_task_and_no_evaluation():
    training = ROOT / "benchharness" / "training"
    files = sorted((training / "methods").rglob("*.py")) + [training / f"{name}.py" for name in LOOP]
    assert len(files) > 20 and all(f.is_file() for f in files)  # the methods and the loop's modules
    offenders = [
        f"{f.relative_to(ROOT)}: {m}"
        for f in files
        for m in sorted(imported_modules(f))
        if any(m == bad or m.startswith(bad + ".") for bad in FORBIDDEN)
    ]
    assert offenders == []
