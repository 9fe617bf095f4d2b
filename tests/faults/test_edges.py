"""Hostile names and files, full and read-only disks: through the real command line where it
matters, with a small tmpfs and a read-only bind mount where this machine lets the test make them
(it runs as root here; elsewhere those tests say why they are skipped)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import re
import subprocess
from pathlib import Path

import pytest

from benchharness.cli import main
from benchharness.core.results import ResultStore
from benchharness.training.recipes import RecipeError, read_book
from tests.helpers import cli, needs_extra, one_line_error, train_tiny_run

HOSTILE = [
    "..",
    ".",
    "...",
    "../escape",
    "a/../../b",
    "/etc/passwd",
    "x\0y",
    "C:\\windows",
    "~",
    "-rf",
    " ",
    "a" * 400,
    "名前",
    "a\nb",
    "$HOME",
    "*",
]


def test_no_encoder_name_leaves_the_results_folder_and_no_two_share_one(tmp_path):
    store = ResultStore(tmp_path / "results")
    names = HOSTILE + ["hf:a/b", "hf_a_b", "hf_a_b@0", "MiniLM", "minilm", "a" * 401, "glove-50d"]
    folders: dict[str, str] = {}
    for name in names:
        path = store.path(name, "STSBenchmark").resolve()
        assert path.parent.parent == (tmp_path / "results").resolve(), name
        assert len(path.parent.name.encode()) <= 160 and "\0" not in path.parent.name
        folders.setdefault(path.parent.name.lower(), name)  # case-insensitive file systems too
    assert len(folders) == len(names)
    assert store.path("glove-50d", "STSBenchmark").parent.name == "glove-50d"  # plain names are their folder
    for task in ("..", ".", "a/b", "x\0y"):
        with pytest.raises(ValueError, match="cannot name a result file"):
            store.path("glove-50d", task)


def test_results_stored_under_the_old_lossy_folder_move_once_by_migrate_and_shared_ones_stay(tmp_path):
    from benchharness.evaluation.migrate import migrate

    root = tmp_path / "results"
    store = ResultStore(root)
    old = root / "hf_a_b"  # where "hf:a/b" was stored before folders became one-to-one
    old.mkdir(parents=True)
    result = {
        "encoder": "hf:a/b",
        "task": "STSBenchmark",
        "main_score": 80.0,
        "main_metric": "spearman",
        "metrics": {},
        "protocol": {},
        "encoder_identity": {},
        "encoder_metadata": {},
        "data": {},
        "seed": 0,
        "timings": {},
        "versions": {},
        "date": "2026-01-01",
    }
    (old / "STSBenchmark.json").write_text(json.dumps(result))
    assert store.load("hf:a/b", "STSBenchmark") is None and old.is_dir()  # a lookup moves nothing
    migrate(root, None)
    assert store.load("hf:a/b", "STSBenchmark").main_score == 80.0
    assert not old.exists() and store.path("hf:a/b", "STSBenchmark").exists()
    shared = root / "hf_c_d"
    shared.mkdir()
    (shared / "STSBenchmark.json").write_text(json.dumps({**result, "encoder": "hf:c/d"}))
    (shared / "STS12.json").write_text(json.dumps({**result, "encoder": "hf_c:d", "task": "STS12"}))
    migrate(root, None)
    assert store.load("hf:c/d", "STSBenchmark") is None and shared.is_dir()  # not this encoder's alone


def test_a_dotdot_encoder_registered_in_the_config_writes_inside_results(project):
    (project / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n\n[encoders.".."]\nspec = "glove-50d"\n')
    assert main(["run", "--encoders", "..", "--tasks", "STSBenchmark", "--quiet"]) == 0
    written = sorted(p.relative_to(project) for p in project.rglob("STSBenchmark.json"))
    assert len(written) == 1 and written[0].parts[0] == "results" and len(written[0].parts) == 3


def test_a_typo_in_an_encoder_table_is_one_line_with_the_close_key(project, capsys):
    (project / "benchharness.toml").write_text('[encoders.g]\nspce = "glove-50d"\n')
    assert main(["run", "--encoders", "g", "--tasks", "STSBenchmark"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[encoders.g] needs spec" in err and "did you mean 'spec'?" in err


def test_a_recipe_that_is_its_own_base_is_refused_through_every_link(tmp_path):
    book = tmp_path / "recipes.toml"
    book.write_text(
        '[recipes.selfbase]\nmethod = "simcse"\nbase = "recipe:selfbase"\n'
        '[recipes.a]\nmethod = "simcse"\nbase = "recipe:b"\n[recipes.b]\nmethod = "simcse"\nbase = "recipe:a"\n'
    )
    with pytest.raises(RecipeError, match=r"'selfbase' is its own base \(recipe:selfbase -> recipe:selfbase\)"):
        read_book(book).get("selfbase")
    with pytest.raises(RecipeError, match=r"'a' is its own base \(recipe:a -> recipe:b -> recipe:a\)"):
        read_book(book).get("a")


class _Payload:
    """Unpickling this creates a file: the proof that a checkpoint ran code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "code ran"))


def test_a_crafted_checkpoint_is_refused_without_running_its_code(tiny_bert, tmp_path):
    import torch

    from benchharness.training.resume import CHECKPOINT_DIR, CHECKPOINT_FILE, load_checkpoint

    marker = tmp_path / "pwned"
    state = tmp_path / CHECKPOINT_DIR / CHECKPOINT_FILE
    state.parent.mkdir()
    with open(state, "wb") as fh:
        pickle.dump({"config": _Payload(str(marker))}, fh)
    config = {"base": str(tiny_bert), "out": str(tmp_path)}
    with pytest.raises(ValueError, match="not a checkpoint this harness can resume safely"):
        load_checkpoint(state, config, torch.nn.Linear(1, 1), None, None, None)  # type: ignore[arg-type]
    assert not marker.exists()
    state.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=f"delete {state.parent}"):
        load_checkpoint(state, config, torch.nn.Linear(1, 1), None, None, None)  # type: ignore[arg-type]


@contextlib.contextmanager
def mounted(kind: str, target: Path, source: Path | None = None):
    """A tmpfs of 256 KiB, or a read-only bind mount of ``source``, at ``target``; skips the test
    with the reason where mounting is not allowed (not root, no mount namespace)."""
    target.mkdir(parents=True, exist_ok=True)
    command = (
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(target)]
        if kind == "tmpfs"
        else ["mount", "--bind", str(source), str(target)]
    )
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no mount command on this machine: the full-disk and read-only tests need one")
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip()}): the full-disk and read-only tests need root")
    try:
        if kind == "ro":
            subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True, capture_output=True)
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_full_cache_disk_is_named_and_the_run_goes_on_without_it(project, capsys, data_dir, caplog):
    import json as json_module

    with mounted("tmpfs", project / "cache"):
        (project / "cache" / "filler").write_bytes(b"\0" * (200 * 1024))  # leaves too little for the vectors
        with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
            code = main(
                [
                    "run",
                    "--encoders",
                    "glove-50d",
                    "--tasks",
                    "STSBenchmark,SICKRelatedness",
                    "--cache-dir",
                    "cache",
                    "--quiet",
                ]
            )
    assert re.search("the embedding cache cannot be written .*disk is full", caplog.text)
    out = capsys.readouterr().out
    assert code == 0 and "cannot rollback" not in out
    stored = json_module.loads((project / "results" / "glove-50d" / "STSBenchmark.json").read_text())
    committed = json_module.loads(
        (Path(__file__).resolve().parents[2] / "results" / "glove-50d" / "STSBenchmark.json").read_text()
    )
    assert stored["main_score"] == pytest.approx(committed["main_score"], abs=0.17)


def test_a_read_only_results_folder_is_refused_before_any_work(project, capsys):
    (project / "results_src").mkdir()
    with mounted("ro", project / "results", project / "results_src"):
        code = main(
            ["run", "--encoders", "glove-50d", "--tasks", "STSBenchmark,SICKRelatedness", "--no-cache", "--quiet"]
        )
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""  # nothing computed, no table
    assert captured.err.count("\n") == 1 and "--results-dir" in captured.err and "Read-only file system" in captured.err


def test_a_cache_database_of_another_identity_is_quarantined_not_served(tmp_path, caplog):
    import numpy as np

    from benchharness.evaluation.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path)
    cache.add("aaaa", ["a dog"], np.ones((1, 3), np.float32))
    cache.add("bbbb", ["a cat"], np.full((1, 3), 2, np.float32))
    (tmp_path / "aaaa" / "embeddings.sqlite").replace(tmp_path / "bbbb" / "embeddings.sqlite")  # planted
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        rows = cache.lookup("bbbb")
    assert "holds the vectors of encoder identity aaaa, not bbbb" in caplog.text
    assert len(rows) == 0  # nothing of encoder aaaa is served as bbbb's


def test_unknown_tables_and_keys_of_the_config_are_one_line_with_the_close_match(project, capsys):
    for text, expected in (
        ('[paths]\ndta_dir = "x"\n', "unknown key in [paths] 'dta_dir' (did you mean 'data_dir'?)"),
        ('[encodrs.g]\nspec = "glove-50d"\n', "unknown table 'encodrs' (did you mean 'encoders'?)"),
    ):
        (project / "benchharness.toml").write_text(text)
        assert main(["list", "tasks"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err and "benchharness.toml" in err


def test_numbers_that_cannot_work_are_refused_before_any_model_loads(project, capsys):
    for value in ("0", "-3"):
        assert (
            main(
                [
                    "run",
                    "--encoders",
                    f"hf:sentence-transformers/all-MiniLM-L6-v2?pooling=avg&max_length={value}",
                    "--tasks",
                    "STSBenchmark",
                ]
            )
            == 2
        )
        assert f"max_length must be a positive integer, got {value}" in capsys.readouterr().err


def test_an_encoder_with_no_word_in_its_vocabulary_says_so_and_stores_nothing(project, capsys, tmp_path):
    vectors = tmp_path / "tiny.glove.txt"
    vectors.write_text("zzzz 0.1 0.2\nyyyy 0.3 0.1\n")
    assert main(["run", "--encoders", f"glove:{vectors}", "--tasks", "STSBenchmark", "--no-cache", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "every one of the 2,551 sentences is encoded as a zero vector" in out and "Traceback" not in out
    assert not list((project / "results").rglob("*.json"))


def test_a_bad_line_of_a_word_vector_file_is_named_without_a_traceback(project, capsys, tmp_path):
    vectors = tmp_path / "bad.glove.txt"
    vectors.write_text("zzzz 0.1 0.2\nyyyy 0.3\n")
    assert main(["run", "--encoders", f"glove:{vectors}", "--tasks", "STSBenchmark", "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert f"{vectors}:2: 1 values, expected 2" in out and "Traceback" not in out


def test_a_cache_path_that_is_a_file_is_named_and_the_run_goes_on(project, capsys, caplog):
    (project / "cachefile").write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="benchharness.evaluation.cache"):
        assert (
            main(["run", "--encoders", "glove-50d", "--tasks", "STSBenchmark", "--cache-dir", "cachefile", "--quiet"])
            == 0
        )
    assert re.search("the embedding cache cannot be written .*Not a directory", caplog.text)
    assert (project / "results" / "glove-50d" / "STSBenchmark.json").is_file()


def test_the_command_compare_prints_for_missing_items_works_when_pasted(project, capsys):
    import shlex

    store = project / "elsewhere"
    for encoder in ("glove-50d", "glove-50d+whitening"):
        assert (
            main(["run", "--encoders", encoder, "--tasks", "STSBenchmark", "--results-dir", str(store), "--quiet"]) == 0
        )
    items = next((store / "glove-50d").glob("STSBenchmark.items*"))
    items.unlink()
    capsys.readouterr()
    assert (
        main(["compare", "glove-50d", "glove-50d+whitening", "--tasks", "STSBenchmark", "--results-dir", str(store)])
        == 2
    )
    err = capsys.readouterr().err
    printed = err[err.index("benchharness run") :].split(";")[0].split(" (")[0].strip().rstrip(".")
    words = shlex.split(printed)
    assert "--results-dir" in words and main(words[1:]) == 0
    assert (
        main(["compare", "glove-50d", "glove-50d+whitening", "--tasks", "STSBenchmark", "--results-dir", str(store)])
        == 0
    )


def test_the_command_train_out_prints_works_when_pasted(project, capsys, tiny_bert, tmp_path):
    import shlex

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "a man is playing a guitar .\nthe red car hit a bus\ntwo dogs run in the field\na child reads a book\n"
    )
    out = tmp_path / "my-run"
    assert (
        main(
            [
                "train",
                "simcse",
                "--base",
                str(tiny_bert),
                "--out",
                str(out),
                "--data",
                str(corpus),
                "--batch-size",
                "2",
                "--max-steps",
                "2",
                "--eval-every",
                "0",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    printed = [line for line in capsys.readouterr().err.splitlines() if "evaluate it with:" in line][-1]
    words = shlex.split(printed.split("evaluate it with:", 1)[1])
    assert words[:2] == ["benchharness", "run"]
    assert main([*words[1:], "--quiet", "--no-cache"]) == 0
    assert (project / "results").is_dir() and list((project / "results").rglob("STS*.json"))


def test_editing_a_training_file_makes_another_recipe(tmp_path, tiny_bert):
    from benchharness.training.recipes import derive

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man is playing a guitar .\nthe red car hit a bus\n")

    def key() -> str:
        return derive("simcse", {"data": f"text:{corpus}"}, base=str(tiny_bert)).key

    first = key()
    assert key() == first  # the same content, the same recipe
    corpus.write_text("a man is playing a guitar .\nthe red car hit a bus\na child reads\n")
    assert key() != first  # a stale run of the old file is never reused


# ---- through the real command line, in a subprocess ------------------------------------------------


@needs_extra("mteb", "mteb")  # export mteb needs it before it looks at --out
def test_exports_to_a_full_or_read_only_folder_are_one_line_and_keep_what_was_there(project):
    (project / "frozen").mkdir()
    (project / "frozen" / "LEADERBOARD.md").write_text("kept\n")
    with mounted("ro", project / "ro", project / "frozen"):
        one_line_error(
            cli(project, "leaderboard", "-o", "ro/LEADERBOARD.md"), "ro/LEADERBOARD.md", "not writable"
        )  # refused before the board is built (cli.options.check_output)
        assert (project / "ro" / "LEADERBOARD.md").read_text() == "kept\n"
    with mounted("tmpfs", project / "full"):
        (project / "full" / "filler").write_bytes(b"\0" * (248 * 1024))
        one_line_error(
            cli(
                project,
                "leaderboard",
                "-o",
                "full/LEADERBOARD.md",
                "--results-dir",
                str(Path(__file__).resolve().parents[2] / "results"),
            ),
            "full/LEADERBOARD.md",
            "No space left on device",
        )
        one_line_error(
            cli(
                project,
                "export",
                "mteb",
                "--out",
                "full/mteb",
                "--encoders",
                "glove-50d",
                "--results-dir",
                str(Path(__file__).resolve().parents[2] / "results"),
            ),
            "full/mteb",
            "No space left on device",
        )
        assert not list((project / "full").rglob(".*.tmp"))  # no temporary file left behind


def test_training_onto_a_full_disk_names_the_file_that_did_not_fit(project, tiny_bert):
    with mounted("tmpfs", project / "full"):
        (project / "full" / "filler").write_bytes(b"\0" * (200 * 1024))  # room for the log, not the model
        one_line_error(train_tiny_run(project, tiny_bert, "full/run"), "full/run/", "No space left on device")


def test_a_run_whose_model_was_deleted_prints_a_retrain_command_that_works_when_pasted(project, tiny_bert):
    import shlex

    assert train_tiny_run(project, tiny_bert, "my-run").returncode == 0
    (project / "my-run" / "model.safetensors").unlink()  # the model's weights, beside the run's manifest
    done = cli(project, "run", "--encoders", "my-run", "--tasks", "STSBenchmark", "--quiet", "--no-cache")
    one_line_error(done, "my-run: the run's model is gone", "--overwrite")
    printed = done.stderr.split("train it again with:", 1)[1].split(" (from the folder")[0]
    assert cli(project, *shlex.split(printed)[1:], "--quiet").returncode == 0
    assert (
        cli(project, "run", "--encoders", "my-run", "--tasks", "STSBenchmark", "--quiet", "--no-cache").returncode == 0
    )
