"""What every benchmark's output shares: a head line naming the command, the commit, the date, the
machine and whether it was idle (load average under 0.5) when the measurement started; where the
lines are kept (``results/benchmarks/<name>.txt``); the smoke mode; the configuration (each
script owns its process, so reads ``benchharness.toml`` once, as the command line does); and the
command that runs ``benchharness`` in a fresh interpreter.

Smoke mode (``BENCHMARK_SMOKE=1``, set by ``tests/unit/test_benchmarks_smoke.py``): every script
runs its whole code path on a tiny input in seconds (a few sentences, one step, one repeat, glove-50d
or the smallest MiniLM), so that a renamed module or changed signature breaks a test rather than
the next measurement. Its numbers mean nothing, so it writes nothing under ``results/``: ``report``
writes to ``$BENCHMARK_RESULTS_DIR`` or a temporary folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchharness.core.data_root import DataRoot
    from benchharness.core.settings import Config

_CONFIG: Config | None = None

#: the environment variable that turns smoke mode on, and the one that redirects ``report``
SMOKE_ENV, RESULTS_ENV = "BENCHMARK_SMOKE", "BENCHMARK_RESULTS_DIR"
SMOKE = os.environ.get(SMOKE_ENV) == "1"


def config() -> Config:
    """The configuration of this checkout (``benchharness.toml``), read once per script."""
    global _CONFIG
    if _CONFIG is None:
        from benchharness.core.settings import load_config

        _CONFIG = load_config()
    return _CONFIG


def data_root() -> DataRoot:
    """The data root the configuration names (``$BENCHHARNESS_DATA`` first)."""
    from benchharness.core.data_root import DataRoot

    return DataRoot(config().data_root())


def cli_command(*args: str) -> list[str]:
    """``benchharness <args>`` as a command for a fresh interpreter of this environment, as a user
    runs it: ``python -m benchharness.cli <args>``."""
    return [sys.executable, "-m", "benchharness.cli", *args]


def header() -> str:
    from benchharness.core.provenance import versions
    from benchharness.training.estimate import cpu_kind

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    load = os.getloadavg()[0]
    state = "idle" if load < 0.5 else "NOT idle: timings indicative only"
    return (
        f"# python {' '.join(sys.argv)}, at {versions().get('git_commit')}, {date.today()}, "
        f"{os.cpu_count()}-core {model} ({cpu_kind()}); load {load:.2f} at start ({state})"
    )


def results_folder() -> Path:
    """Where ``report`` keeps its lines: ``$BENCHMARK_RESULTS_DIR``, else a temporary folder in smoke
    mode, else the checkout's ``results/benchmarks``."""
    if os.environ.get(RESULTS_ENV):
        return Path(os.environ[RESULTS_ENV])
    if SMOKE:
        return Path(tempfile.mkdtemp(prefix="benchmark-smoke-"))
    return Path(__file__).resolve().parents[1] / "results" / "benchmarks"


def report(name: str, lines: list[str]) -> None:
    """Print the lines and keep them in ``<results_folder()>/<name>.txt``."""
    print("\n".join(lines))
    out = results_folder() / f"{name}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
