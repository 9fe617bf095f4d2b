"""Issue #34, code execution, plugins, Ray and names, through the real command line in a subprocess:
a run manifest never runs code, an unreachable Ray address fails in seconds, one broken plugin or
file task breaks only its own names, and the messages name what the user can type."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from benchharness.core.errors import InvalidInputError
from tests.helpers import cli, cli_process, one_line_error

TASK = "SICKRelatedness-trial"  # 500 pairs: the smallest STS task


@pytest.fixture
def shared_runs(project: Path) -> Path:
    """A project whose runs folder is ./runs (a shared folder others can write to)."""
    (project / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\nruns_dir = "runs"\n')
    return project / "runs"


def hostile_run(folder: Path, encoder: dict) -> Path:
    """A run folder whose manifest names code, beside a ``__main__.py`` that leaves a mark when run
    (``runpy.run_path(folder)`` runs it: what the ``python`` family's builder would call)."""
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"name": folder.name, "encoder": encoder}))
    mark = folder / "ran"
    (folder / "__main__.py").write_text(f"open({str(mark)!r}, 'w').write('code from a manifest ran')\n")
    return mark


# --- 13: a run folder's manifest names only model families ------------------------------------------


@pytest.mark.parametrize("how", ["folder", "registered name"])
def test_a_manifest_that_names_the_python_family_is_refused_before_any_code_runs(shared_runs, how):
    mark = hostile_run(shared_runs / "evil", {"type": "python", "object": "runpy:run_path"})
    name = str(shared_runs / "evil") if how == "folder" else "evil"
    done = cli(shared_runs.parent, "run", "--encoders", name, "--tasks", TASK, "--no-cache")
    one_line_error(done, str(shared_runs / "evil" / "manifest.json"), "'python' family", "from weights")
    assert not mark.exists()


def test_a_tuned_manifest_whose_composition_names_python_is_refused(shared_runs):
    from benchharness.evaluation.resolver import Resolver

    mark = hostile_run(shared_runs / "tuned", {"type": "compose", "spec": "python:runpy:run_path+whitening"})
    for call in (Resolver().check, Resolver().get):
        with pytest.raises(InvalidInputError, match=r"tuned/manifest\.json: names the 'python' family"):
            call("tuned")
    assert not mark.exists()


def test_the_users_own_config_may_still_name_a_python_object(project):
    """The refusal is the manifest's: ``benchharness.toml`` is the user's own, as before."""
    from benchharness.evaluation.resolver import Resolver

    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n[encoders.mine]\nspec = "fakes:HashEncoder"\n'
    )
    encoder = Resolver().get("mine")
    assert type(encoder).__name__ == "HashEncoder" and encoder.name == "mine"


@pytest.mark.parametrize("manifest", [[1, 2], {"encoder": "hf"}, {"encoder": {"type": ["python"]}}])
def test_a_manifest_of_the_wrong_shape_is_one_line_and_list_still_works(shared_runs, manifest):
    (shared_runs / "odd").mkdir(parents=True)
    (shared_runs / "odd" / "manifest.json").write_text(json.dumps(manifest))
    one_line_error(
        cli(shared_runs.parent, "run", "--encoders", str(shared_runs / "odd"), "--tasks", TASK, "--no-cache"),
        "odd/manifest.json",
    )
    listed = cli(shared_runs.parent, "list", "encoders")
    assert listed.returncode == 0 and "glove-50d" in listed.stdout, listed.stderr


# --- 14: an unreachable Ray address fails in seconds -------------------------------------------------


def test_an_unreachable_ray_address_is_a_one_line_error_within_seconds(project):
    pytest.importorskip("ray", reason="the 'distributed' extra (ray) is not installed")
    start = time.monotonic()
    done = cli_process(
        project,
        "run",
        "--encoders",
        "glove-50d",
        "--tasks",
        TASK,
        "--executor",
        "ray",
        "--address",
        "127.0.0.1:1",
        "--no-cache",
        timeout=120,
    )
    one_line_error(done, "cannot reach a Ray cluster at '127.0.0.1:1'", "within 10 s")
    assert time.monotonic() - start < 100  # ray's import is most of it; no connection is retried
    one_line_error(
        cli_process(
            project,
            "run",
            "--encoders",
            "glove-50d",
            "--tasks",
            TASK,
            "--executor",
            "ray",
            "--address",
            "head-without-port",
            "--no-cache",
            timeout=120,
        ),
        "'head-without-port' is not host:port",
    )


def test_an_address_where_something_else_answers_is_a_one_line_error(project):
    """A port that accepts connections but is no Ray head (ray.init retried it without end too)."""
    pytest.importorskip("ray", reason="the 'distributed' extra (ray) is not installed")
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_http() -> None:
        with server:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer_http, daemon=True).start()
    try:
        done = cli_process(
            project,
            "run",
            "--encoders",
            "glove-50d",
            "--tasks",
            TASK,
            "--executor",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
            "--no-cache",
            timeout=120,
        )
    finally:
        server.close()
    one_line_error(done, f"cannot reach a Ray cluster at '127.0.0.1:{port}'", "not a Ray head")


# --- 10: the unknown-encoder error is one short line --------------------------------------------------


def test_an_unknown_encoder_gives_the_close_matches_and_where_the_rest_are(project):
    error = one_line_error(
        cli(project, "run", "--encoders", "glove-5d", "--tasks", TASK, "--no-cache"),
        "unknown encoder 'glove-5d'",
        "Did you mean: glove-50d",
        "benchharness list encoders",
    )
    assert "minilm-l6" not in error and len(error) < 300, error  # not every known name


# --- 9: a trained run's message names what run --encoders accepts -----------------------------------


def test_a_run_trained_with_out_is_announced_by_its_folder_not_as_registered(project, tiny_bert):
    (project / "corpus.txt").write_text(
        "a man is playing a guitar .\nthe red car hit a bus\ntwo dogs run in the field\na child reads a book\n"
    )
    done = cli(
        project,
        "train",
        "simcse",
        "--base",
        str(tiny_bert),
        "--out",
        "run1",
        "--data",
        "corpus.txt",
        "--batch-size",
        "2",
        "--max-steps",
        "2",
        "--eval-every",
        "0",
        "--threads",
        "1",
    )
    assert done.returncode == 0, done.stderr
    folder = (project / "run1").resolve()
    assert "encoder registered" not in done.stderr
    assert f"encoder saved in {folder} (" in done.stderr
    assert f"; evaluate it with: benchharness run --encoders {folder} --tasks sts" in done.stderr
    listed = cli(project, "list", "encoders", "--long")
    assert str(folder) not in listed.stdout  # as announced: not registered


def test_a_run_under_the_runs_folder_is_announced_by_its_registered_name(shared_runs):
    pytest.importorskip("torch")
    from benchharness.cli.train import resolvable_as
    from benchharness.evaluation.resolver import Resolver

    (shared_runs / "folder-1").mkdir(parents=True)
    (shared_runs / "folder-1" / "manifest.json").write_text(
        json.dumps({"name": "my-run", "encoder": {"type": "compose", "spec": "glove-50d+whitening"}})
    )
    message = resolvable_as(Path("runs/folder-1"), "my-run", shared_runs)
    assert message.startswith("encoder registered: my-run (in ") and "--encoders my-run --tasks" in message
    assert Resolver().spec_for("my-run") == {"type": "compose", "spec": "glove-50d+whitening"}  # it resolves
    elsewhere = resolvable_as(Path("runs/folder-1"), "another-name", shared_runs)  # not the name the folder registers
    assert elsewhere.startswith(f"encoder saved in {(shared_runs / 'folder-1').resolve()} ")


# --- weak: one broken plugin breaks only its own names ----------------------------------------------


@pytest.fixture
def broken_plugins(project: Path) -> dict[str, str]:
    """An installed distribution (a dist-info on PYTHONPATH) with a tasks plugin whose module raises
    while it is imported, and a family whose module does not exist."""
    site = project / "site"
    info = site / "bh_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "bh_broken_tasks.py").write_text("raise RuntimeError('the plugin author broke this')\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bh-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[benchharness.tasks]\nbroken = bh_broken_tasks:TASKS\n"
        "[benchharness.families]\nghost = bh_no_such_module:FAMILY\n"
        "[benchharness.methods]\nghostly = bh_no_such_method\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_a_broken_plugin_breaks_only_its_own_names(project, broken_plugins):
    listed = cli_process(project, "list", "tasks", env=broken_plugins)
    assert listed.returncode == 0 and "| STSBenchmark " in listed.stdout, listed.stderr
    warnings = [line for line in listed.stderr.splitlines() if "'broken'" in line]
    assert len(warnings) == 1 and "RuntimeError: the plugin author broke this" in warnings[0], listed.stderr
    assert cli_process(project, "list", "encoders", env=broken_plugins).returncode == 0
    done = cli_process(
        project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache", "--quiet", env=broken_plugins
    )
    assert done.returncode == 0 and "computed" in done.stdout and TASK in done.stdout, done.stderr
    one_line_error(
        cli_process(project, "run", "--encoders", "ghost:x", "--tasks", TASK, "--no-cache", env=broken_plugins),
        "families plugin 'ghost' = 'bh_no_such_module:FAMILY' (from bh-broken) cannot be loaded",
    )
    one_line_error(
        cli_process(
            project, "run", "--encoders", "glove-50d", "--tasks", "BrokenTask", "--no-cache", env=broken_plugins
        ),
        "unknown task 'BrokenTask'",
        "unavailable: tasks plugin 'broken'",
    )


# --- weak: file tasks' names -------------------------------------------------------------------------


def test_a_broken_method_plugin_named_by_train_gives_its_load_error_not_argparse_usage(project, broken_plugins):
    done = cli_process(project, "train", "ghostly", "--base", "x", "--out", "run", env=broken_plugins)
    assert done.returncode == 2 and "usage:" not in done.stderr, done.stderr
    assert (
        "benchharness: error: methods plugin 'ghostly' = 'bh_no_such_method' (from bh-broken) cannot be loaded"
        in done.stderr
    )
    assert cli_process(project, "train", "--help", env=broken_plugins).returncode == 0  # the other methods still list


def test_a_file_task_named_as_a_builtin_stops_no_command(project):
    (project / "mine.csv").write_text("sentence1,sentence2,score\na,b,1\nc,d,2\n")
    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n[tasks.STSBenchmark]\nfile = "mine.csv"\n'
    )
    done = cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache", "--quiet")
    assert done.returncode == 0, done.stderr
    assert (
        "[tasks.STSBenchmark] is left out: 'STSBenchmark' is taken by the task 'STSBenchmark' of the 'sts' "
        "task plugin" in done.stderr
    )


def test_an_overlong_task_name_fails_before_any_work(project):
    (project / "mine.csv").write_text("sentence1,sentence2,score\na,b,1\nc,d,2\n")
    long = "t" * 300
    (project / "benchharness.toml").write_text(f'[paths]\ncache_dir = ".cache"\n[tasks.{long}]\nfile = "mine.csv"\n')
    one_line_error(
        cli(project, "run", "--encoders", "glove-50d", "--tasks", long, "--no-cache"),
        "task name of 300 characters; use at most 150",
    )
    assert not (project / "results").exists()  # refused before any encoding or scoring


def test_a_shared_run_named_like_a_composition_does_not_stand_in_for_it(project, caplog):
    from benchharness.evaluation.resolver import Resolver

    runs = project / "runs"
    (project / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\nruns_dir = "runs"\n')
    for name in ("glove-50d+whitening", "glove-50d+whitening-tuned"):
        folder = runs / name.replace("+", "_")
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({"name": name, "encoder": {"type": "glove", "file": "x"}}))
        (folder / "x").write_text("a 0.5 0.5\n")
    resolver = Resolver()
    composed = resolver.get("glove-50d+whitening")
    assert type(composed).__name__ == "Whitening" and composed.name == "glove-50d+whitening"
    assert sum("is a composition" in r.getMessage() for r in caplog.records) == 1
    # "whitening-tuned" is no post-processor: that name is no composition, and it stays the run's
    assert resolver.spec_for("glove-50d+whitening-tuned")["type"] == "glove"
    assert resolver._registered_whole("glove-50d+whitening-tuned")
