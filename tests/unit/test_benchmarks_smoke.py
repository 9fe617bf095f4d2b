"""Every script in ``benchmarks/`` runs end to end in smoke mode (``BENCHMARK_SMOKE=1``: a tiny input,
seconds each; see ``benchmarks/machine.py``), each in its own process as a user runs it, so that a
renamed module or a changed signature fails here instead of at the next measurement. No timing is
asserted: smoke numbers mean nothing. A script is any ``benchmarks/*.py`` with a ``__main__`` guard,
so a new one is covered without an edit here; the helper modules must be imported by a script.

The smoke runs are a tier of their own (``pytest --benchmark-smoke -m benchmark_smoke``, CI's second
step): about 11 minutes of a worker's time, as long as the rest of the suite, for tools that
measure the harness rather than the harness itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks"
MAIN_GUARD = 'if __name__ == "__main__":'


def _scripts() -> list[Path]:
    return sorted(p for p in FOLDER.glob("*.py") if MAIN_GUARD in p.read_text())


def _needs(module: str) -> str | None:
    """Why a script cannot run here (a missing optional dependency), or None."""
    import importlib.util

    return None if importlib.util.find_spec(module) else f"needs {module}, not installed here"


#: the scripts that need an optional dependency: skipped, with the reason, where it is absent
NEEDS = {"mteb_overhead.py": "mteb", "ray_scaling.py": "ray", "trainer_evaluator.py": "datasets"}


def test_every_helper_module_is_imported_by_a_script():
    helpers = {p.stem for p in FOLDER.glob("*.py")} - {p.stem for p in _scripts()}
    sources = "\n".join(p.read_text() for p in _scripts())
    assert helpers and all(f"from {name} import" in sources for name in helpers), helpers


@pytest.mark.benchmark_smoke
@pytest.mark.parametrize("script", _scripts(), ids=lambda p: p.name)
def test_script_runs_in_smoke_mode(script: Path, tmp_path: Path):
    module = NEEDS.get(script.name)
    reason = _needs(module) if module else None
    if reason:
        pytest.skip(reason)
    kept = ROOT / "results" / "benchmarks"
    before = {p: p.stat().st_mtime_ns for p in kept.glob("*")} if kept.is_dir() else {}
    # RAY_ADDRESS=local: a script's Ray starts a cluster of its own, not joining the Ray tests' session
    # cluster (ray.init without an address joins the latest cluster started on this machine)
    env = {
        **os.environ,
        "BENCHMARK_SMOKE": "1",
        "BENCHMARK_RESULTS_DIR": str(tmp_path / "kept"),
        "TQDM_DISABLE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_ADDRESS": "local",
    }
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert done.stdout.strip(), f"{script.name} printed nothing"
    after = {p: p.stat().st_mtime_ns for p in kept.glob("*")} if kept.is_dir() else {}
    assert after == before, "a smoke run wrote into results/benchmarks"
