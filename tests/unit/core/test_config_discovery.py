"""Where the configuration comes from: --config / $BENCHHARNESS_CONFIG, else the project's
benchharness.toml (here or in a parent), else the per-user file; and where results then go."""

from __future__ import annotations

import os

import pytest

from benchharness.cli import main
from benchharness.core import settings
from benchharness.core.data_root import DataError, DataRoot


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("BENCHHARNESS_CONFIG", raising=False)
    monkeypatch.delenv("BENCHHARNESS_DATA", raising=False)
    return tmp_path


def test_the_per_user_file_serves_a_project_without_its_own(fresh, monkeypatch):
    user = fresh / "xdg" / "benchharness" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[paths]\ndata_dir = "/somewhere/data"\n')
    project = fresh / "project" / "deep"
    project.mkdir(parents=True)
    monkeypatch.chdir(project)
    cfg = settings.load_config()
    assert cfg.file == user and cfg.data_dir == settings.Path("/somewhere/data")
    assert cfg.results_dir == project / "results"  # the project's, not beside the per-user file


def test_a_project_file_in_a_parent_wins_over_the_per_user_file(fresh, monkeypatch):
    (fresh / "xdg" / "benchharness").mkdir(parents=True)
    (fresh / "xdg" / "benchharness" / "config.toml").write_text('[paths]\ndata_dir = "/user"\n')
    (fresh / "project").mkdir()
    (fresh / "project" / "benchharness.toml").write_text('[paths]\ndata_dir = "data"\n')
    (fresh / "project" / "sub").mkdir()
    monkeypatch.chdir(fresh / "project" / "sub")
    cfg = settings.load_config()
    assert cfg.data_dir == fresh / "project" / "data" and cfg.results_dir == fresh / "project" / "results"


def test_config_names_the_file_on_the_command_line(fresh, monkeypatch, capsys):
    chosen = fresh / "elsewhere.toml"
    chosen.write_text('[encoders.g]\nspec = "glove-50d"\n')
    (fresh / "benchharness.toml").write_text('[encoders.h]\nspec = "glove-50d"\n')
    monkeypatch.chdir(fresh)
    monkeypatch.setenv("BENCHHARNESS_CONFIG", "")  # restored (removed) after the test
    assert main(["--config", str(chosen), "list", "encoders"]) == 0
    names = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert "g" in names and "h" not in names
    assert os.environ["BENCHHARNESS_CONFIG"] == ""  # an argument, not exported to the environment
    assert main(["--config", str(fresh / "missing.toml"), "list", "tasks"]) == 2
    assert "missing.toml (--config) does not exist" in capsys.readouterr().err


def test_a_missing_data_root_is_named_with_how_to_get_it(fresh, monkeypatch):
    monkeypatch.chdir(fresh)
    with pytest.raises(DataError, match=r"the data root .*/data does not exist: point --data-dir, \$BENCHHARNESS_DATA"):
        DataRoot(settings.load_config().data_root()).path("senteval/STS/x.txt", "senteval")
