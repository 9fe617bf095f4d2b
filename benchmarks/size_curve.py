"""The encoders guide's figure of quality against size: paraphrase-MiniLM-L3-v2 truncated to
d = 32, 64, 128, 256 and the full 384, in float32, int8 and binary, on STS-B and SICK-R (SICK's
trial split and d = 32, 384 in smoke mode), drawn by ``benchharness report``'s code from one run
(the base encoded once through a fresh cache), with the paired tests of every size against the
full vector. Writes ``docs/size-curve.png`` and ``results/benchmarks/size_curve.txt``::

    python benchmarks/size_curve.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from machine import SMOKE, config, data_root, header, report, results_folder

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from benchharness.core.settings import apply_environment

    apply_environment(config())  # this script owns its process: the offline hub cache, before the hub loads
    head = header()  # the load before this script's own work
    import benchharness
    from benchharness.reporting.size_curve import size_families, size_figure

    task_names = ["SICKRelatedness-trial"] if SMOKE else ["STSBenchmark", "SICKRelatedness"]
    dims = "32" if SMOKE else "32|64|128|256"
    sizes = [f"minilm-l3+truncate(d={dims})", f"minilm-l3+truncate(d={dims})+quantize(precision=int8|binary)"]
    with tempfile.TemporaryDirectory() as folder:
        results = benchharness.evaluate(
            [*sizes, "minilm-l3", "minilm-l3+quantize(precision=int8|binary)"],
            task_names,
            data_dir=data_root().root,
            cache_dir=Path(folder) / "cache",
        )
    figure = size_figure(size_families(results.results))
    out = (results_folder() if SMOKE else ROOT / "docs") / "size-curve.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=150, bbox_inches="tight", metadata={"Software": None})
    table = benchharness.compare(results, results, encoder_a=f"minilm-l3+truncate(d={dims})", encoder_b="minilm-l3")
    report("size_curve", [head, f"figure: {out.name}", "", str(table)])


if __name__ == "__main__":
    main()
