"""Offline, an mteb benchmark whose datasets are not cached is told in one line: how many tasks
lack their dataset, how to fetch them, which are cached. It used to print one error line per task,
a table of as many failures, then ``results in <folder>`` though nothing was stored there."""

from __future__ import annotations

import os

import pytest

from tests.helpers import cli, cli_process

mteb = pytest.importorskip("mteb")

BENCHMARK = "MTEB(eng, v2)"
SUMMARY = "mteb tasks need a dataset that is not in the Hugging Face cache"


def test_an_uncached_benchmark_offline_is_one_line_and_nothing_is_claimed_stored(project, tmp_path):
    """The command as a user types it, in a fresh process, with empty Hugging Face caches."""
    empty_hub, empty_datasets = tmp_path / "hub", tmp_path / "datasets"
    empty_hub.mkdir()
    empty_datasets.mkdir()
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_CACHE": str(empty_hub),
        "HF_DATASETS_CACHE": str(empty_datasets),
    }
    done = cli_process(project, "run", "--encoders", "glove-50d", "--tasks", f"mteb:{BENCHMARK}", env=env)
    tasks = len(mteb.get_benchmark(BENCHMARK).tasks)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {tasks} of {tasks} {SUMMARY} (HF_HUB_CACHE={empty_hub}, ")
    assert "offline (HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1)" in line
    assert "run it once with HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 to download them" in line
    assert "none of the mteb tasks selected is cached" in line
    assert done.stdout.splitlines() == [
        f"nothing stored in {project / 'results'}: {tasks} of {tasks} evaluations failed"
    ]
    assert not list(project.glob("results/**/*.json"))
    assert not any(os.scandir(empty_datasets)) and not any(os.scandir(empty_hub))  # nothing was fetched


@pytest.fixture
def two_uncached_and_one_in_memory(monkeypatch):
    """``mteb:XRun`` is a task built in memory (its data are there); ``mteb:STS12`` and
    ``mteb:STS13`` are mteb's, at a dataset revision no cache holds."""
    from benchharness.mteb_bridge import evaluate as bridge_run
    from benchharness.mteb_bridge.memory import sts_task

    real = bridge_run.get_task
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")

    def get_task(name):
        short = bridge_run.task_name(name)
        if short == "XRun":
            return sts_task(
                "XRun", ["a cat sits", "dogs run", "rain falls"], ["a cat sat", "a dog ran", "snow"], [4, 3, 1]
            )
        task = real(name)
        if short in ("STS12", "STS13"):
            task.metadata = task.metadata.model_copy(
                update={"dataset": {**task.metadata.dataset, "revision": "0" * 40}}
            )
        return task

    monkeypatch.setattr(bridge_run, "get_task", get_task)


def test_the_line_names_the_cached_tasks_which_run_and_are_stored(project, two_uncached_and_one_in_memory):
    done = cli(project, "run", "--encoders", "glove-50d", "--tasks", "mteb:STS12,mteb:XRun,mteb:STS13", "--quiet")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: 2 of 3 {SUMMARY}") and line.endswith(
        "cached, and evaluated: mteb:XRun (-v names each dataset)"
    )
    rows = [row for row in done.stdout.splitlines() if row.startswith("| glove-50d")]
    assert len(rows) == 1 and "| mteb:XRun " in rows[0] and "| computed " in rows[0]
    assert done.stdout.splitlines()[-1] == f"results in {project / 'results'}"
    assert [p.name for p in project.glob("results/*/*.json")] == ["mteb:XRun.json"]


def test_with_v_each_task_names_its_dataset(project, two_uncached_and_one_in_memory):
    done = cli(project, "run", "-v", "--encoders", "glove-50d", "--tasks", "mteb:STS12,mteb:STS13")
    lines = [line for line in done.stderr.splitlines() if "cannot load" in line]
    assert [line.split("]")[0] for line in lines] == ["[mteb:STS12", "[mteb:STS13"]
    assert "dataset mteb/sts12-sts at revision " + "0" * 40 in lines[0]
    assert "dataset mteb/sts13-sts at revision " + "0" * 40 in lines[1]
