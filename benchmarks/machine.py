"""What every benchmark's output shares: a head line naming the command, the commit, the date, the
machine and whether it was idle (load average under 0.5) when the measurement started; and where
the lines are kept (``results/benchmarks/<name>.txt``)."""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path


def header() -> str:
    from benchharness.core.provenance import versions
    from benchharness.training.on_demand import cpu_kind

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    load = os.getloadavg()[0]
    state = "idle" if load < 0.5 else "NOT idle: timings indicative only"
    return (f"# python {' '.join(sys.argv)}, at {versions().get('git_commit')}, {date.today()}, "
            f"{os.cpu_count()}-core {model} ({cpu_kind()}); load {load:.2f} at start ({state})")


def report(name: str, lines: list[str]) -> None:
    """Print the lines and keep them in ``results/benchmarks/<name>.txt``."""
    print("\n".join(lines))
    out = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / f"{name}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
