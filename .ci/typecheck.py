#!/usr/bin/env python3
"""mypy over the package as it installs: ``python .ci/typecheck.py [mypy options]``.

pyproject.toml's ``[tool.setuptools.package-dir]`` installs the top-level ``encoders/`` and ``tasks/``
folders as ``benchharness.encoders`` and ``benchharness.tasks``, and the editable install reaches them
through an import hook, which mypy cannot follow: a plain ``mypy -p benchharness`` finds neither.
So this script hands mypy every module of ``[tool.setuptools] packages`` by its import name and its
real path (errors name ``encoders/...``, the file to open), with the options of ``[tool.mypy]``.
The cache (``.mypy_cache``) makes a rerun after a small edit take seconds.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import define_options, process_options
from mypy.modulefinder import BuildSource
from mypy.options import Options

ROOT = Path(__file__).resolve().parents[1]
#: the modules checked as `strict = true` checks them (pyproject's override lists the flags one by one)
STRICT = ("benchharness", "benchharness.core.*")


def sources(pyproject: dict) -> list[BuildSource]:
    """One source per module of every listed package, found where package-dir puts the package."""
    setuptools = pyproject["tool"]["setuptools"]
    folders: dict[str, str] = setuptools.get("package-dir", {})
    found = []
    for package in setuptools["packages"]:
        # the longest mapped prefix decides: benchharness.encoders.postprocess -> encoders/postprocess
        prefix = max((p for p in folders if package == p or package.startswith(p + ".")), key=len, default="")
        rest = package[len(prefix) :].lstrip(".").split(".") if package != prefix else []
        folder = Path(folders[prefix] if prefix else ".", *[part for part in rest if part])
        for path in sorted((ROOT / folder).glob("*.py")):
            module = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found.append(BuildSource(str(path.relative_to(ROOT)), module, None))
    return found


def strict_gaps(options: Options) -> list[str]:
    """Flags of mypy's --strict that pyproject's override leaves off for a strict module pattern."""
    _, _, assignments = define_options()
    gaps = []
    for pattern in STRICT:
        given = options.per_module_options.get(pattern, {})
        for flag, value in assignments:
            if flag != "warn_redundant_casts" and given.get(flag) != value:  # that one is global only
                gaps.append(f"{pattern}: {flag} = {str(value).lower()}")
    return gaps


def main(argv: list[str]) -> int:
    os.chdir(ROOT)  # pyproject.toml's [tool.mypy], the sources' paths and .mypy_cache are the repository's
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    fscache = FileSystemCache()
    # the options as `mypy` itself reads them (pyproject's [tool.mypy], then argv); its own sources are replaced
    _, options = process_options([*argv, "-p", "benchharness"], fscache=fscache)
    gaps = strict_gaps(options)
    if gaps:
        print("pyproject.toml's strict override lacks flags that mypy's --strict sets:", *gaps, sep="\n  ")
        return 2
    checked = sources(pyproject)
    try:
        result = build.build(checked, options, fscache=fscache, stdout=sys.stdout, stderr=sys.stderr)
    except CompileError as exc:  # a syntax error or a blocking one: mypy stops there
        print(*exc.messages, sep="\n")
        return 2
    for line in result.errors:
        print(line)
    errors = sum(": error:" in line for line in result.errors)
    files = len({line.split(":", 1)[0] for line in result.errors if ": error:" in line})
    print(f"Found {errors} errors in {files} files" if errors else f"Success: no issues in {len(checked)} modules")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
