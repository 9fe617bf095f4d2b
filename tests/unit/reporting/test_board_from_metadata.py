"""The leaderboard's tables come from the tasks' metadata: a plugin's task gets its column, a task
nobody installed keeps one, and the built-in tables are the papers' (checked against the published
CSVs' own headers, not against the code that builds them)."""

from __future__ import annotations

import csv

import pytest
from test_leaderboard import _result

from benchharness.core.results import ResultStore
from benchharness.core.task import BoardColumn, BoardSection, Evaluation, Task, TaskMetadata, TaskProvider
from benchharness.reporting.leaderboard import OTHER_TITLE, PUBLISHED_DIR, build, sections
from benchharness.tasks import boards


class _Plugin(Task):
    """A task of a plugin: metadata only, as the leaderboard needs nothing else."""

    def __init__(self, name: str, family: str, board: BoardSection | None = None, **kw) -> None:
        super().__init__()
        self.metadata = TaskMetadata(
            name, family, "a plugin's task", "test", "acc", "plugin-v1", "none", board=board, **kw
        )

    def _load(self, data) -> None:  # pragma: no cover - never loaded here
        raise AssertionError

    def sentences(self) -> list[str]:  # pragma: no cover
        return []

    def evaluate(self, embed, seed) -> Evaluation:  # pragma: no cover
        raise AssertionError


def _titles(board) -> list[str]:
    return [t.section.title for t in board.tables]


def _headers(board, title: str) -> list[str]:
    return next(t.headers for t in board.tables if t.section.title == title)


#: the published CSVs' columns that describe a row, not a score of a task
NOT_SCORES = {"paper", "table", "setting", "model", "base", "Avg", "std_note", "note"}


def test_the_built_in_tables_are_the_published_tables_columns():
    """Each table with published numbers has a column for each of its CSV's score columns, in the
    CSV's order; the STS table averages, as the papers do, the ranking table does not."""
    by_title = {s.title: s for s in sections([])}
    for board in (boards.STS, boards.TRANSFER, boards.RANKING):
        section = by_title[board.title]
        with (PUBLISHED_DIR / board.published_csv).open() as fh:
            header = next(csv.reader(line for line in fh if not line.startswith("#")))
        scores = [h for h in header if h not in NOT_SCORES]
        assert [c.published for c in section.columns] == scores
    assert [c.header for c in by_title[boards.STS.title].columns] == [
        "STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R"
    ]  # fmt: skip
    assert [c.header for c in by_title[boards.PROBING.title].columns][:3] == ["SentLen", "WC", "TreeDepth"]
    in_order = (boards.STS, boards.TRANSFER, boards.RANKING, boards.SENTEVAL_FURTHER, boards.PROBING)
    assert [s.title for s in sections([])][:5] == [b.title for b in in_order]
    assert (by_title[boards.STS.title].average, by_title[boards.RANKING.title].average) == (True, False)


def test_variants_of_a_board_task_are_not_columns():
    tasks = {c.task for s in sections([]) for c in s.columns}
    assert {"STSBenchmark-dev", "STSBenchmark-raw", "SICKRelatedness-mteb", "AskUbuntu-mteb", "MR-fast"}.isdisjoint(
        tasks
    )
    assert {"STSBenchmark", "MR", "QQP", "SNLI", "CoordinationInversion"} <= tasks


def test_a_plugin_task_gets_a_column_in_the_table_it_names_or_its_familys(tmp_path, register_plugin):
    mine = BoardSection("My suite (accuracy %)", order=25, average=True)
    register_plugin(
        "tasks",
        "my-suite",
        TaskProvider(
            tasks={
                "Alpha": lambda: _Plugin("Alpha", "mine", mine, board_columns=(BoardColumn("α"),)),
                "Beta": lambda: _Plugin("Beta", "mine", mine),
                "Gamma": lambda: _Plugin("Gamma", "parsing"),  # names no table
                "Alpha-dev": lambda: _Plugin("Alpha-dev", "mine", mine, on_board=False),
            }
        ),
    )
    store = ResultStore(tmp_path)
    for task, score in (("Alpha", 60.0), ("Beta", 70.0), ("Gamma", 40.0), ("Alpha-dev", 99.0)):
        store.save(_result("enc", task, score))
    board = build(store, None)
    assert _titles(board) == ["My suite (accuracy %)", "parsing tasks (main score x100)"]
    assert _headers(board, "My suite (accuracy %)") == ["α", "Beta", "Avg."]
    row = board.tables[0].lines[0]
    assert [c.text for c in row.cells] == ["60.00", "70.00", "65.00"]  # the mean of the two, by hand
    assert _headers(board, "parsing tasks (main score x100)") == ["Gamma"]


def test_results_of_a_task_nobody_installed_keep_a_column(tmp_path):
    store = ResultStore(tmp_path)
    store.save(_result("enc", "STS12", 71.0))
    store.save(_result("enc", "Uninstalled", 33.0))
    gone_file_task = _result("enc", "my-pairs", 44.0)
    gone_file_task.protocol["variant"] = "file-pairs-senteval-unsup-cosine"
    store.save(gone_file_task)
    board = build(store, None)
    assert _titles(board) == [boards.STS.title, boards.FILES.title, OTHER_TITLE]
    assert _headers(board, OTHER_TITLE) == ["Uninstalled"]
    assert _headers(board, boards.FILES.title) == ["my-pairs"]
    other = next(t for t in board.tables if t.section.title == OTHER_TITLE)
    assert [c.text for c in other.lines[0].cells] == ["33.00"]


@pytest.mark.parametrize("broken", [RuntimeError("no metadata"), KeyError("x")])
def test_a_task_whose_factory_fails_is_shown_as_unknown(tmp_path, register_plugin, broken):
    def factory():
        raise broken

    register_plugin("tasks", "broken-one", TaskProvider(tasks={"Broken": factory}))
    store = ResultStore(tmp_path)
    store.save(_result("enc", "Broken", 12.0))
    assert _headers(build(store, None), OTHER_TITLE) == ["Broken"]
