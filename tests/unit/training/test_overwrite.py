"""``benchharness train --overwrite`` deletes what a run wrote and nothing else: never the user's own
files, never the working directory or one of its parents, and it refuses before any model loads.
The run store clears an interrupted run's folder by the same rule."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from benchharness.core.errors import InvalidInputError
from benchharness.training.runstore import RunStore
from tests.helpers import cli, one_line_error

CORPUS = "a man is playing a guitar .\nthe red car hit a bus\ntwo dogs run in the field\na child reads a book\n"
#: what a finished run of the loop leaves in its folder (outputs.py), listed here by hand: the run's
#: records beside its model's files (a tiny BERT's, and how sentence-transformers pools it)
FINISHED = {
    "manifest.json",
    "metrics.jsonl",
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "1_Pooling",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
}


def train(cwd: Path, base: Path, out: str, *extra: str, data: str = "corpus.txt"):
    """``benchharness train simcse`` as a user types it in ``cwd``: 2 steps of batch 2, no dev evaluation."""
    flags = ["--base", str(base), "--out", out, "--data", data, "--batch-size", "2", "--max-steps", "2"]
    return cli(cwd, "train", "simcse", *flags, "--eval-every", "0", "--threads", "1", "--quiet", *extra)


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes: what must survive a refusal."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def no_model_loads(monkeypatch):
    """A refusal must come before the base model loads: loading it fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the base model was loaded before the refusal")

    monkeypatch.setattr("benchharness.training.harness.load_base", refuse)


@pytest.fixture
def finished(project, tiny_bert) -> Path:
    """``project/out``, a finished run (and ``project/corpus.txt``)."""
    (project / "corpus.txt").write_text(CORPUS)
    assert train(project, tiny_bert, "out").returncode == 0
    assert {p.name for p in (project / "out").iterdir()} == FINISHED
    return project / "out"


@pytest.mark.parametrize("overwrite", [(), ("--overwrite",)])
def test_a_folder_of_the_users_own_files_is_refused_and_kept(project, tiny_bert, no_model_loads, overwrite):
    (project / "corpus.txt").write_text(CORPUS)
    (project / "out").mkdir()
    (project / "out" / "notes.txt").write_text("mine")
    line = one_line_error(train(project, tiny_bert, "out", *overwrite), "out holds notes.txt")
    if not overwrite:  # the advice must not be the flag that would delete them
        assert "--overwrite" not in line, line
    assert contents(project / "out") == {"notes.txt": b"mine"}


def test_overwrite_refuses_a_run_folder_that_also_holds_the_users_files(finished, tiny_bert, no_model_loads):
    for name in ("notes.txt", "b.txt", "c.txt", "d.txt"):
        (finished / name).write_text(name)
    before = contents(finished)
    one_line_error(train(finished.parent, tiny_bert, "out", "--overwrite"), "out holds b.txt, c.txt, d.txt and 1 more")
    assert contents(finished) == before


def test_overwrite_retrains_a_run_deleting_what_it_wrote_and_the_leftovers_of_its_writes(finished, tiny_bert):
    # what a write killed midway leaves (core/atomic.py): a folder's previous copy, a file's temporary;
    # and the model/ folder of a run written before the model's files sat beside its manifest
    (finished / ".1_Pooling.old").mkdir()
    (finished / ".1_Pooling.old" / "config.json").write_text("{}")
    (finished / "model").mkdir()
    (finished / "model" / "config.json").write_text("{}")
    (finished / ".manifest.json.k3j9x_ab.tmp").write_text("{")
    first = (finished / "manifest.json").read_text()
    assert train(finished.parent, tiny_bert, "out", "--overwrite").returncode == 0
    assert {p.name for p in finished.iterdir()} == FINISHED
    assert (finished / "manifest.json").read_text() != first  # retrained: a new date, a new duration


@pytest.mark.parametrize("where", [".", "$PWD"])
def test_overwrite_never_clears_the_current_folder(finished, tiny_bert, no_model_loads, where):
    """Standing in a finished run's folder (it holds nothing but the run), --out names it."""
    before = contents(finished)
    out = str(finished) if where == "$PWD" else where
    one_line_error(train(finished, tiny_bert, out, "--overwrite", data="../corpus.txt"), "is the current folder")
    assert contents(finished) == before


def test_overwrite_never_clears_a_parent_of_the_current_folder(finished, tiny_bert, no_model_loads):
    """Standing in the run's 1_Pooling/ folder, --out .. names the run: 1_Pooling/ is the run's, but it is
    where the user is."""
    before = contents(finished)
    done = train(finished / "1_Pooling", tiny_bert, "..", "--overwrite", data="../../corpus.txt")
    one_line_error(done, "is a parent of the current folder")
    assert contents(finished) == before


@dataclass(frozen=True)
class Recipe:
    """What the run store needs of a recipe (runstore.Recipe)."""

    method: str = "simcse"
    key: str = "0123456789ab"
    display_name: str = "simcse"
    rounds: int | None = None
    encoder_round: int | None = None

    def record(self) -> dict:
        return {"method": self.method, "key": self.key}


def test_the_run_store_clears_only_what_an_interrupted_run_wrote(tmp_path):
    store, recipe = RunStore(tmp_path), Recipe()
    folder = store.out(recipe)
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text('{"step": 10}\n')
    (folder / ".metrics.jsonl.a1b2c3d4.tmp").write_text("")
    store.clear_unresumable(recipe)  # killed before its first checkpoint: nothing to resume
    assert list(folder.iterdir()) == []

    (folder / "metrics.jsonl").write_text('{"step": 10}\n')
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(InvalidInputError, match=r"notes\.txt, which no run writes"):
        store.clear_unresumable(recipe)
    assert (folder / "notes.txt").read_text() == "mine"
