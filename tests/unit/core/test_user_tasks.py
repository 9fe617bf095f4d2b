"""One's own tasks without touching a checkout: the per-user file's ``[tasks.*]`` are known in every
project, beneath the first configuration found (``--config``, ``$BENCHHARNESS_CONFIG``, the
project's ``benchharness.toml``, the per-user file), which gives everything else."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy.stats import spearmanr

from tests.helpers import cli, glove_cosines

#: common English words, so that GloVe knows them; graded gold scores
PAIRS = [
    ("a man is playing a guitar", "a man plays the guitar", 4.8),
    ("the cat sat on the mat", "a dog ran in the park", 0.4),
    ("the sun is shining today", "it is a bright day", 3.5),
    ("the car is red", "the house is blue", 1.0),
    ("he is reading a book", "she is writing a letter", 1.6),
    ("a bird is flying over the sea", "a bird flies above the water", 4.0),
]


def _declare(config: Path, label: str, *tasks: str) -> Path:
    """``config`` declaring ``tasks`` (each on its own copy of the pairs beside it) and an encoder
    ``origin`` described by ``label``."""
    config.parent.mkdir(parents=True, exist_ok=True)
    (config.parent / "pairs.csv").write_text(
        "sentence1,sentence2,score\n" + "".join(f"{a},{b},{s}\n" for a, b, s in PAIRS)
    )
    text = f'[encoders.origin]\nspec = "glove-50d"\ndescription = "{label}"\n'
    config.write_text(text + "".join(f'[tasks.{t}]\nfile = "pairs.csv"\n' for t in tasks))
    return config


@pytest.fixture
def user_file(monkeypatch, tmp_path_factory) -> Path:
    """The per-user file (``$XDG_CONFIG_HOME/benchharness/config.toml``), declaring ``shared`` and ``mine``."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv("BENCHHARNESS_CONFIG", raising=False)
    return _declare(home / "benchharness" / "config.toml", "user", "shared", "mine")


def test_a_task_of_the_per_user_file_runs_inside_a_project_with_its_own_file(project, user_file):
    done = cli(project, "run", "--encoders", "glove-50d", "--tasks", "mine", "--quiet")
    assert done.returncode == 0, done.stderr
    first, second, gold = zip(*PAIRS)
    want = spearmanr(glove_cosines(list(first), list(second)), gold)[0] * 100
    row = next(line for line in done.stdout.splitlines() if line.startswith("| glove-50d"))
    assert float(row.split("|")[4]) == pytest.approx(want, abs=0.01)
    assert (project / "results" / "glove-50d" / "mine.json").is_file()  # the project's results folder


def _sources(cwd: Path, *config: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """Where ``list`` finds each name: the folder of a task's file, the encoder's description."""
    tasks = cli(cwd, *config, "list", "tasks", env=env)
    encoders = cli(cwd, *config, "list", "encoders", env=env)
    assert tasks.returncode == encoders.returncode == 0, tasks.stderr + encoders.stderr
    found = {}
    for line in tasks.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("shared", "mine"):
            found[cells[0]] = Path(cells[-1].split(" from ")[1].split(",")[0]).parent.name
    row = next(line for line in encoders.stdout.splitlines() if line.startswith("| origin "))
    found["encoders"] = row.strip("|").split("|")[-1].strip()
    return found


def test_the_first_file_found_gives_everything_and_the_per_user_file_adds_its_tasks(
    project, user_file, tmp_path_factory
):
    _declare(project / "benchharness.toml", "project", "shared")
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # no benchharness.toml here or above
    named = _declare(elsewhere / "named" / "c.toml", "named", "shared")
    given = _declare(elsewhere / "given" / "c.toml", "given", "shared")
    env = {"BENCHHARNESS_CONFIG": str(named)}
    mine = user_file.parent.name  # the per-user file's own task, from its own folder, in every case
    # --config, then $BENCHHARNESS_CONFIG, then the project's file, then the per-user file
    assert _sources(project, "--config", str(given), env=env) == {"shared": "given", "mine": mine, "encoders": "given"}
    assert _sources(project, env=env) == {"shared": "named", "mine": mine, "encoders": "named"}
    assert _sources(project) == {"shared": project.name, "mine": mine, "encoders": "project"}
    assert _sources(elsewhere) == {"shared": mine, "mine": mine, "encoders": "user"}


def test_a_mistake_in_a_per_user_task_names_the_per_user_file(project, user_file):
    with user_file.open("a") as fh:
        fh.write('[tasks.bad]\nfile = "pairs.csv"\nkind = "nope"\n')
    done = cli(project, "list", "tasks")
    assert done.returncode == 0
    assert f"warning: {user_file}: [tasks.bad]: kind 'nope'" in done.stderr
