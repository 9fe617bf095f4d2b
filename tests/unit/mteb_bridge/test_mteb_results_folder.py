"""``leaderboard --mteb-results FOLDER`` as a user runs it: a result measured here, exported with
``export mteb --out``, read back beside the measured row in the board's own tables (whose STS table
has an Avg. column), and a folder with bad files in it (truncated, a link out of the folder), which
lose only themselves, each named in a warning.

No network: glove-50d on STS16 from the shared data, mteb's task metadata from the package.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from tests.helpers import cli

os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
pytest.importorskip("mteb")

#: what the board names the exported model (``as_model.export_name``: glove-50d is no hub model)
EXPORTED = "benchharness/glove-50d"


def _measured_and_exported(project):
    """glove-50d's stored STS16 result, and the model folder ``export mteb --out X`` wrote for it."""
    done = cli(project, "run", "--encoders", "glove-50d", "--tasks", "STS16", "--quiet")
    assert done.returncode == 0, done.stderr
    stored = json.loads((project / "results" / "glove-50d" / "STS16.json").read_text())
    done = cli(project, "export", "mteb", "--out", "X")
    assert done.returncode == 0, done.stderr
    (folder,) = (project / "X" / "results").glob("*/*")
    assert (folder / "STS16.json").is_file()
    return stored, folder


def _cells(board: str, encoder: str, column: str = "STS16") -> dict[str, str]:
    """The cells by header of ``encoder``'s row in the first table of the board with ``column``."""
    lines = board.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| ") and f" {column} " in line)
    header = [c.strip() for c in lines[at].strip("|").split("|")]
    for line in lines[at + 2 :]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == encoder:
            return dict(zip(header, cells))
    raise AssertionError(f"no row {encoder} in the table of {column}:\n{board}")


def test_an_export_is_shown_beside_the_measured_row_however_the_board_is_filtered(project):
    """The default board's STS table averages (Avg.): an imported row must have that cell too."""
    stored, _ = _measured_and_exported(project)
    score = f"{stored['main_score']:.2f}"
    for flags in (
        (),
        ("--tasks", "sts"),
        ("--encoders", "glove-50d"),
        ("--tasks", "STS16"),
        ("--tasks", "STS16,STS12"),
    ):
        done = cli(project, "leaderboard", "--mteb-results", "X", *flags)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (flags, done.stderr)
        imported, measured = _cells(done.stdout, EXPORTED), _cells(done.stdout, "glove-50d")
        assert imported["Source"] == "published: mteb results X" and imported["STS16"] == measured["STS16"] == score
        assert set(imported) == set(measured)  # a cell per header, Avg. included where the table has one
        if "Avg." in imported:  # the whole STS suite: the export has STS16 alone, so no average
            assert imported["Avg."] == "" and imported["STS12"] == ""


def test_an_imported_row_averages_as_the_measured_rows_do():
    from benchharness.reporting.board import Column, Section
    from benchharness.reporting.mteb_tables import imported_lines

    class Model:
        name, source, tasks = "org/model", "folder", frozenset({"A", "B"})

        def __init__(self, scores):
            self.scores = scores

        def score(self, task):
            return self.scores.get(task)

    columns = (Column("A", "A"), Column("B", "B"))
    whole, partial = Model({"A": 50.0, "B": 71.0}), Model({"A": 50.0})
    averaged = imported_lines(Section("t", columns, None, average=True), [whole, partial])
    assert [[c.value for c in line.cells] for line in averaged] == [[50.0, 71.0, 60.5], [50.0, None, None]]
    plain = imported_lines(Section("t", columns, None, average=False), [whole])
    assert [c.value for c in plain[0].cells] == [50.0, 71.0]


def test_bad_files_are_skipped_with_a_warning_each_and_the_rest_imported(project, tmp_path_factory):
    """A truncated file, a link to /proc/self/environ and a link to a valid result outside the folder:
    none is read (the outside result would fill STS13), each is named in one warning line."""
    stored, folder = _measured_and_exported(project)
    good = json.loads((folder / "STS16.json").read_text())
    outside = tmp_path_factory.mktemp("outside") / "STS13.json"
    outside.write_text(json.dumps({**good, "task_name": "STS13"}))
    (folder / "STS15.json").write_text((folder / "STS16.json").read_text()[:120])
    (folder / "STS14.json").symlink_to("/proc/self/environ")
    (folder / "STS13.json").symlink_to(outside)

    done = cli(project, "leaderboard", "--tasks", "sts", "--mteb-results", "X")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    cells = _cells(done.stdout, EXPORTED)
    assert cells["STS16"] == f"{stored['main_score']:.2f}"
    assert cells["STS13"] == cells["STS14"] == cells["STS15"] == ""
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    shown = os.path.join("X", os.path.relpath(folder, project / "X"))
    environ = os.path.realpath("/proc/self/environ")  # /proc/<pid>/environ: the command runs in this process
    assert sorted(warnings) == [
        f"warning: skipped {shown}/STS13.json: it links out of the results folder (to {outside})",
        f"warning: skipped {shown}/STS14.json: it links out of the results folder (to {environ})",
        f"warning: skipped {shown}/STS15.json: unreadable (JSONDecodeError: {_decode_error(folder / 'STS15.json')})",
    ]


def _decode_error(path):
    """What the json module says of ``path``."""
    try:
        json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        return str(exc)
    raise AssertionError(f"{path} is valid JSON")


def test_an_unreadable_model_meta_names_the_model_by_its_folders(project):
    stored, folder = _measured_and_exported(project)
    copy = project / "Y"
    shutil.copytree(project / "X", copy)
    meta = copy / folder.relative_to(project / "X") / "model_meta.json"
    meta.write_text(meta.read_text()[:40])
    done = cli(project, "leaderboard", "--tasks", "STS16", "--mteb-results", "Y")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert _cells(done.stdout, EXPORTED)["STS16"] == f"{stored['main_score']:.2f}"
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith(f"warning: skipped {os.path.join('Y', meta.relative_to(copy))}: unreadable (")
    assert warning.endswith("; its results are named by their folders")
