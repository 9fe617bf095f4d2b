"""``export mteb --out X`` as a user runs it: it writes new files, replaces only those an export wrote,
refuses in one line (writing nothing) where a file it did not write is in the way, and says why a
task declared from the user's own files is not exported.

No network: glove-50d on STS16 from the shared data, mteb's task metadata from the package.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.helpers import cli, one_line_error

os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
pytest.importorskip("mteb")


def _files(root: Path) -> dict[Path, bytes]:
    """Every file under ``root`` (links as their target's name) with its bytes."""
    out: dict[Path, bytes] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            out[path] = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return out


@pytest.fixture
def measured(project):
    """A project in ``project`` with glove-50d's STS16 stored, a user's notes beside it, and the model
    folder an export of it writes, relative to ``--out``."""
    done = cli(project, "run", "--encoders", "glove-50d", "--tasks", "STS16", "--quiet")
    assert done.returncode == 0, done.stderr
    (project / "notes.md").write_text("my notes\n")
    (project / "sub").mkdir()
    (project / "sub" / "draft.txt").write_text("draft\n")
    identity = json.loads((project / "results" / "glove-50d" / "STS16.json").read_text())["encoder_identity"]
    return Path("results") / "benchharness__glove-50d" / identity["hash"]


@pytest.mark.parametrize(("cwd", "out"), [(".", "."), ("sub", ".."), ("sub", "."), (".", "X")])
def test_an_export_adds_files_and_keeps_every_file_it_did_not_write(project, measured, cwd, out):
    """Into the current folder, a parent, or a folder of the user's: twice (the second replaces the
    first's files only); every file there before keeps its bytes, the project's results included."""
    (project / "X").mkdir()
    (project / "X" / "mine.json").write_text("{}\n")
    before = _files(project)
    for _ in range(2):
        done = cli(project / cwd, "export", "mteb", "--out", out)
        assert done.returncode == 0, done.stderr
        after = _files(project)
        assert {p: after[p] for p in before} == before
        model = (project / cwd / out).resolve() / measured
        assert {p.relative_to(model) for p in set(after) - set(before)} == {
            Path("STS16.json"),
            Path("model_meta.json"),
            Path("benchharness", "provenance.json"),
        }
    assert json.loads((model / "benchharness" / "provenance.json").read_text())["written"] == [
        "STS16.json",
        "model_meta.json",
    ]
    # the results folder is still the project's: the board reads it as before
    assert cli(project, "leaderboard", "--no-published").returncode == 0


@pytest.mark.parametrize("name", ["STS16.json", "model_meta.json"])
def test_a_file_an_export_did_not_write_stops_it_in_one_line_before_anything_is_written(project, measured, name):
    """As mteb's own run of a model at the same revision leaves it in ``$MTEB_CACHE``."""
    theirs = project / "X" / measured / name
    theirs.parent.mkdir(parents=True)
    theirs.write_text('{"written": "by mteb"}\n')
    before = _files(project)
    done = cli(project, "export", "mteb", "--out", "X")
    line = one_line_error(done, f"X/{measured}/{name} exists and was not written by `benchharness export mteb`")
    assert "export to another folder" in line
    assert _files(project) == before


def test_a_link_in_the_way_is_not_replaced(project, measured):
    target = project / "elsewhere.json"
    target.write_text("{}\n")
    link = project / "X" / measured / "STS16.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    before = _files(project)
    one_line_error(cli(project, "export", "mteb", "--out", "X"), f"X/{measured}/STS16.json exists")
    assert _files(project) == before and link.is_symlink()


def test_a_task_declared_from_files_is_not_exported_for_its_own_reason(project):
    (project / "pairs.csv").write_text(
        "sentence1,sentence2,score\n"
        "a man is playing a guitar,a man plays the guitar,4.8\n"
        "the cat sat on the mat,a dog ran in the park,0.4\n"
        "the sun is shining today,it is a bright day,3.5\n"
        "the car is red,the house is blue,1.0\n"
    )
    with (project / "benchharness.toml").open("a") as fh:
        fh.write('[tasks.my-pairs]\nfile = "pairs.csv"\n')
    assert cli(project, "run", "--encoders", "glove-50d", "--tasks", "my-pairs", "--quiet").returncode == 0
    done = cli(project, "export", "mteb", "--out", "X")
    assert done.returncode == 0, done.stderr
    reason = (
        "a task declared from your own files ([tasks.my-pairs], protocol file-pairs-cosine): mteb has no task "
        "with its data, and mteb's results layout holds only mteb tasks' results"
    )
    assert done.stdout.splitlines() == [
        f"not exported glove-50d my-pairs: {reason}",
        "0 result(s) exported to X, 1 not exported",
    ]
