"""What gets installed: one import root, ``benchharness``, from a wheel as from the checkout, and
nothing that a user's own ``tasks.py`` or ``encoders/`` folder could shadow or be shadowed by."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from benchharness.evaluation.verify import TOLERANCE

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_package_list_is_every_folder_under_its_import_name():
    folders = set()
    for folder, prefix in (
        ("benchharness", "benchharness"),
        ("encoders", "benchharness.encoders"),
        ("tasks", "benchharness.tasks"),
    ):
        for init in (ROOT / folder).rglob("__init__.py"):
            folders.add(".".join((prefix, *init.parent.relative_to(ROOT / folder).parts)))
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == folders
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {
        "benchharness": "benchharness",
        "benchharness.encoders": "encoders",
        "benchharness.tasks": "tasks",
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the sources (an in-tree build/ folder could hold stale files)."""
    source = tmp_path_factory.mktemp("source") / "benchharness"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "results", "runs", ".cache", "*.egg-info", "__pycache__", ".pytest_cache"
        ),
    )
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(out.glob("benchharness-*.whl"))


def test_the_wheel_installs_one_import_root_with_its_data_files(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"benchharness", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "benchharness/training/recipes.toml" in names
    assert "benchharness/core/data_checksums.json" in names
    sources = {
        p.relative_to(ROOT).as_posix() for d in ("benchharness", "encoders", "tasks") for p in (ROOT / d).rglob("*.py")
    }
    installed = {
        n.removeprefix("benchharness/") if n.startswith(("benchharness/encoders/", "benchharness/tasks/")) else n
        for n in names
        if n.endswith(".py")
    }
    assert installed == sources


def test_a_wheel_install_evaluates_beside_a_project_with_its_own_tasks_and_encoders(wheel, tmp_path, data_dir):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    project = tmp_path / "project"
    (project / "encoders").mkdir(parents=True)
    (project / "encoders" / "__init__.py").write_text("raise SystemExit('the project encoders/ was imported')\n")
    (project / "tasks.py").write_text("raise SystemExit('the project tasks.py was imported')\n")
    env = {**os.environ, "PYTHONPATH": str(site), "BENCHHARNESS_DATA": str(data_dir)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import benchharness.encoders, benchharness.tasks as t; "
                "print(benchharness.encoders.__file__); print(t.__file__)"
            ),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.split())
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchharness.cli",
            "run",
            "--encoders",
            "glove-50d",
            "--tasks",
            "STSBenchmark",
            "--results-dir",
            "out",
            "--no-cache",
            "--quiet",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    fresh = json.loads((project / "out" / "glove-50d" / "STSBenchmark.json").read_text())
    stored = json.loads((ROOT / "results" / "glove-50d" / "STSBenchmark.json").read_text())
    assert fresh["encoder_identity"]["hash"] == stored["encoder_identity"]["hash"]
    assert fresh["main_score"] == pytest.approx(stored["main_score"], abs=TOLERANCE)
    assert fresh["versions"]["git_commit"] is None  # a wheel has no checkout to take a commit from
