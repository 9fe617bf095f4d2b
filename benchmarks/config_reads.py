"""How often one command reads ``benchharness.toml``, and where the package calls ``load_config``.

The configuration is read once at the edge (the command line, ``evaluate``, ``train``) and travels
as a value from there. This counts the reads of the file during one ``benchharness run`` (and
one ``benchharness.evaluate``) in a fresh project, and lists the ``load_config(`` and
``hub_settings(`` calls in the package's source, so that an old checkout and this one can be
compared in one run (``--old``: a checkout with its own ``.venv``, whose interpreter counts its code)::

    python benchmarks/config_reads.py --old ../old
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import SMOKE, header, report  # noqa: E402

CALLS = re.compile(r"\b(load_config|hub_settings)\(")
RUN = ["run", "--encoders", "glove-50d", "--tasks", "SICKRelatedness-trial", "--no-cache", "--quiet"]


def call_sites(checkout: Path) -> list[str]:
    """``file:line: text`` of every ``load_config(``/``hub_settings(`` call outside a definition,
    a docstring line or a comment, in the package's folders."""
    sites = []
    for folder in ("benchharness", "encoders", "tasks"):
        for path in sorted((checkout / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if CALLS.search(code) and not code.lstrip().startswith("def ") and "``" not in code:
                    sites.append(f"{path.relative_to(checkout)}:{n}: {line.strip()}")
    return sites


def counted_reads(action) -> int:
    """How many times ``action()`` reads a file named benchharness.toml."""
    real = Path.read_text
    reads = [0]

    def read_text(self: Path, *args, **kwargs) -> str:
        if self.name == "benchharness.toml":
            reads[0] += 1
        return real(self, *args, **kwargs)

    Path.read_text = read_text  # type: ignore[method-assign]
    try:
        action()
    finally:
        Path.read_text = real  # type: ignore[method-assign]
    return reads[0]


def _commit(checkout: Path) -> str:
    """The commit a checkout is at (a path of this machine never goes into a results file)."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "an unknown commit"


def measure(checkout: Path) -> list[str]:
    """The counts for the benchharness this interpreter imports, and the call sites of ``checkout``."""
    import benchharness
    from benchharness.cli import main as cli

    data = Path(os.environ.get("BENCHHARNESS_DATA", ROOT.parent / "shared" / "data")).resolve()
    project = Path(tempfile.mkdtemp(prefix="config-reads-"))
    (project / "benchharness.toml").write_text(f'[paths]\ndata_dir = "{data}"\ncache_dir = ".cache"\n')
    os.chdir(project)
    os.environ.pop("BENCHHARNESS_CONFIG", None)
    os.environ.pop("BENCHHARNESS_DATA", None)

    def run() -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert cli(RUN) == 0

    def evaluate() -> None:
        benchharness.evaluate("glove-50d", "SICKRelatedness-trial")

    run()  # imports and first-use caches out of the way: the counts are of a second call
    reads_run, reads_evaluate = counted_reads(run), counted_reads(evaluate)
    sites = call_sites(checkout)
    own = Path(benchharness.__file__).is_relative_to(checkout)
    return [
        f"checkout at {_commit(checkout)} (benchharness imported from it: {own}):",
        f"  `benchharness {' '.join(RUN)}` reads benchharness.toml {reads_run} times",
        f"  `benchharness.evaluate('glove-50d', 'SICKRelatedness-trial')` reads it {reads_evaluate} times",
        f"  load_config( / hub_settings( calls in the package's source: {len(sites)}",
        *(f"    {s}" for s in sites),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", default=str(ROOT), help=argparse.SUPPRESS)
    parser.add_argument("--print-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--old", action="append", default=[], help="another checkout, run with its .venv's python")
    args = parser.parse_args()
    if args.print_only:
        print("\n".join(measure(Path(args.checkout).resolve())))
        return
    lines = [header()]
    for old in args.old:
        folder = Path(old).resolve()
        done = subprocess.run(
            [str(folder / ".venv" / "bin" / "python"), __file__, "--checkout", str(folder), "--print-only"],
            capture_output=True,
            text=True,
            check=True,
        )
        lines += done.stdout.splitlines()
    lines += measure(ROOT)
    report("config_reads" + ("-smoke" if SMOKE else ""), lines)


if __name__ == "__main__":
    main()
