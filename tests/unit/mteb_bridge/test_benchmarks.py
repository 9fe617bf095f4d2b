"""mteb benchmarks by name, mteb's filters, the leaderboard's benchmark tables and imported mteb
results, checked against mteb's own ``get_benchmark``/``get_task`` filtering and ``Benchmark.get_score``.

No network: mteb's task and benchmark metadata ship with the package, tasks that run are built in
memory, and the results folders are written here (by ``export mteb`` and by hand in mteb's layout).
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import pytest
from scipy import stats

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
mteb = pytest.importorskip("mteb")

from mteb.results import BenchmarkResults, ModelResult, TaskResult  # noqa: E402

from benchharness import tasks  # noqa: E402
from benchharness.mteb_bridge import selection  # noqa: E402
from benchharness.mteb_bridge.benchmarks import MEAN_TASK, MEAN_TASK_TYPE, benchmark  # noqa: E402
from benchharness.mteb_bridge.memory import multilingual_sts_task  # noqa: E402
from tests.helpers import glove_cosines  # noqa: E402

ENG_V2 = "MTEB(eng, v2)"


# --- selection: benchmarks by name and mteb's filters ----------------------------------------------


def test_a_benchmark_by_name_selects_mtebs_task_list_with_mtebs_subsets_and_splits():
    names = tasks.resolve(f"mteb:{ENG_V2}")
    official = mteb.get_benchmark(ENG_V2).tasks
    assert [selection.parse(n).name for n in names] == [t.metadata.name for t in official]
    assert len(names) == 41
    for name, task in zip(names, official):
        rebuilt = selection.task(name)  # from the name alone
        assert (rebuilt.hf_subsets, rebuilt.eval_splits) == (task.hf_subsets, task.eval_splits), name
    # the tasks the benchmark narrows are named by what they evaluate; the rest by their own name
    assert "mteb:STS22.v2[subsets=en]" in names and "mteb:STS17[subsets=en-en]" in names
    assert "mteb:MTOPDomainClassification[subsets=en; splits=test]" in names and "mteb:STS12" in names


def test_commas_inside_brackets_belong_to_the_name_and_repeats_are_dropped():
    names = tasks.resolve(f"STS12, mteb:{ENG_V2},mteb:STS22.v2[languages=eng; exclusive], mteb:STS12")
    assert names[0] == "STS12" and len(names) == 42  # STS22.v2 filtered so is one of the benchmark's tasks
    assert names.count("mteb:STS22.v2[subsets=en]") == 1


@pytest.mark.parametrize(
    ("spec", "kwargs"),
    [
        ("STS22.v2[languages=eng]", {"languages": ["eng"]}),
        ("STS22.v2[languages=eng; exclusive]", {"languages": ["eng"], "exclusive_language_filter": True}),
        ("STS22.v2[languages=deu-Latn,fra]", {"languages": ["deu-Latn", "fra"]}),
        ("STS17[subsets=en-en,ko-ko]", {"hf_subsets": ["en-en", "ko-ko"]}),
        (
            "MTOPDomainClassification[splits=test; languages=eng,deu]",
            {"eval_splits": ["test"], "languages": ["eng", "deu"]},
        ),
        ("MassiveIntentClassification[scripts=Cyrl]", {"script": ["Cyrl"]}),
    ],
)
def test_filters_select_what_mtebs_get_task_selects(spec, kwargs):
    (name,) = tasks.resolve(f"mteb:{spec}")
    want = mteb.get_task(selection.parse(spec).name, **kwargs)
    got = selection.task(name)
    assert (got.hf_subsets, got.eval_splits) == (want.hf_subsets, want.eval_splits)


def test_a_filtered_benchmark_keeps_the_tasks_that_have_a_subset_in_the_language():
    names = tasks.resolve("mteb:MTEB(Multilingual, v2)[languages=deu; splits=test]")
    official = mteb.get_benchmark("MTEB(Multilingual, v2)").tasks
    want = []
    for task in official:  # independently: a subset of the benchmark's whose languages include German
        langs = task.metadata.hf_subsets_to_langscripts
        if "test" in task.eval_splits and any(any(ls.startswith("deu") for ls in langs[s]) for s in task.hf_subsets):
            want.append(task.metadata.name)
    assert [selection.parse(n).name for n in names] == want
    for name in names:
        task = selection.task(name)
        assert task.eval_splits == ["test"]
        assert all(
            any(ls.startswith("deu") for ls in task.metadata.hf_subsets_to_langscripts[s]) for s in task.hf_subsets
        )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mteb:STS22.v2[languages=xxx]", "Invalid language code: xxx"),
        ("mteb:STS22.v2[splits=dev]", "leave nothing to evaluate; its subsets are en, de"),
        ("mteb:STS22.v2[lang=eng]", "'lang=eng' is not a filter"),
        ("mteb:MTEB(eng, v2", "unbalanced brackets"),
        ("mteb:MTEB(eng,v2)", "did you mean: MTEB(eng, v2),"),
        ("mteb:STS22.v2[languages=eng]x", "filters go in one [...] at the end"),
    ],
)
def test_a_bad_selection_is_a_one_line_error_naming_it(spec, message):
    with pytest.raises(tasks.UnknownTaskError) as info:
        tasks.resolve(spec)
    text = info.value.args[0]
    assert message in text and "\n" not in text


# --- running a filtered task ------------------------------------------------------------------------

FIRST = ["a cat sits", "dogs run fast", "the sky is blue", "rain falls", "a man sings"]
SECOND = ["a cat is sitting", "a dog runs", "blue skies", "snow melts", "someone cooks"]
#: the language labels are what filters select on; the text is English in both (the test's GloVe is)
SUBSETS = {
    "en": ("eng-Latn", FIRST, SECOND, [0.5, 1.0, 4.5, 3.0, 3.5]),
    "de": ("deu-Latn", FIRST, SECOND, [4.5, 3.0, 3.5, 1.0, 0.5]),
}


@pytest.fixture
def multilingual(monkeypatch):
    """``XMulti``: an in-memory STS task with an English and a German subset."""
    from benchharness.mteb_bridge import evaluate as bridge

    real = bridge.get_task
    monkeypatch.setattr(
        bridge,
        "get_task",
        lambda name: multilingual_sts_task("XMulti", SUBSETS) if bridge.task_name(name) == "XMulti" else real(name),
    )


def test_a_language_filter_evaluates_that_subset_alone_under_the_name_of_what_ran(
    project, multilingual, tmp_path, capsys
):
    from benchharness.cli import main

    assert main(["run", "--encoders", "glove-50d", "--tasks", "mteb:XMulti[languages=deu]", "--quiet"]) == 0
    (path,) = (project / "results" / "glove-50d").glob("mteb*XMulti*.json")
    stored = json.loads(path.read_text())
    assert stored["task"] == "mteb:XMulti[subsets=de]"
    assert {k.split("/")[1] for k in stored["metrics"] if "/" in k} == {"de"}
    _, first, second, gold = SUBSETS["de"]
    assert stored["main_score"] == pytest.approx(stats.spearmanr(glove_cosines(first, second), gold)[0] * 100, abs=1e-4)
    assert stored["protocol"]["subsets"] == ["de"] and stored["protocol"]["splits"] == ["test"]

    # exported, it loads in mteb's reader; imported back, its row shows the same score beside the measured one
    assert main(["export", "mteb", "--out", str(tmp_path / "exported")]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--papers", "none", "--mteb-results", str(tmp_path / "exported")]) == 0
    board = capsys.readouterr().out
    section = board[board.index("## mteb tasks") :].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    measured = next(r for r in rows if r.startswith("| glove-50d"))
    imported = next(r for r in rows if "published: mteb results" in r)
    score = f"{stored['main_score']:.2f}"
    assert score in measured and score in imported
    assert "read from mteb results folders" in board

    # compare: the measured score beside the published one, no test
    task = stored["task"]
    exported = str(tmp_path / "exported")
    assert main(["compare", "glove-50d", "benchharness/glove-50d", "--tasks", task, "--mteb-results", exported]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| mteb:XMulti"))
    assert [c.strip() for c in row.strip("|").split("|")][1:] == [score, score, "+0.00"]
    assert main(["compare", "glove-50d", "glove-50d", "--tasks", task, "--mteb-results", exported]) == 2
    assert "Did you mean: benchharness/glove-50d?" in capsys.readouterr().err


# --- the leaderboard's benchmark tables against mteb's Benchmark.get_score ---------------------------


def _hand_made_results(root, rng):
    """A folder in mteb's results layout, written by hand (``TaskResult.to_disk``): a model with every
    task of MTEB(eng, v2), with scores for subsets and splits the benchmark leaves out too, and one
    missing a task. Returns mteb's ``BenchmarkResults`` of the same."""
    models = []
    for model, drop in (("org/complete", None), ("org/partial", "STS12")):
        results = []
        for task in mteb.get_benchmark(ENG_V2).tasks:
            if task.metadata.name == drop:
                continue
            whole = mteb.get_task(task.metadata.name)  # every subset and split of the task, not the benchmark's
            scores = {
                split: {s: {"main_score": float(rng.uniform(0.2, 0.9))} for s in whole.hf_subsets}
                for split in whole.eval_splits
            }
            result = TaskResult.from_task_results(whole, scores, evaluation_time=1.0)
            folder = root / "results" / model.replace("/", "__") / "abc123"
            folder.mkdir(parents=True, exist_ok=True)
            result.to_disk(folder / f"{task.metadata.name}.json")
            results.append(result)
        models.append(ModelResult(model_name=model, model_revision="abc123", task_results=results))
    return BenchmarkResults(model_results=models)


def test_benchmark_table_means_equal_mtebs_get_score(project, tmp_path, capsys):
    from benchharness.cli import main

    official = _hand_made_results(tmp_path / "published", np.random.default_rng(0))
    want = mteb.get_benchmark(ENG_V2).get_score(official)
    (project / "results").mkdir()
    capsys.readouterr()
    assert main(["leaderboard", "--papers", "none", "--mteb-results", str(tmp_path / "published")]) == 0
    board = capsys.readouterr().out
    section = board[board.index(f"## mteb benchmark {ENG_V2}") :].split("\n## ")[0]
    header = [c.strip() for c in section.splitlines()[2].strip("|").split("|")]
    rows = {
        c[0]: c
        for line in section.splitlines()[4:]
        if line.startswith("| ")
        for c in [[x.strip() for x in line.strip("|").split("|")]]
    }
    complete = rows["org/complete"]
    for key in (MEAN_TASK, MEAN_TASK_TYPE, "Classification", "Retrieval", "STS", "Summarization"):
        assert float(complete[header.index(key)]) == pytest.approx(want["org/complete"][key] * 100, abs=0.005), key
    assert complete[-1] == "41"
    # the partial row: no benchmark means (mteb gives none), a mean for every type it has whole
    partial = rows["org/partial"]
    assert partial[header.index(MEAN_TASK)] == "" and partial[header.index("STS")] == ""
    benchmark_tasks = {t.metadata.name: t for t in mteb.get_benchmark(ENG_V2).tasks}
    (partial_results,) = [r for r in official.model_results if r.model_name == "org/partial"]
    retrieval = [
        r.validate_and_filter_scores(benchmark_tasks[r.task_name]).get_score()
        for r in partial_results.task_results
        if benchmark_tasks[r.task_name].metadata.type == "Retrieval"
    ]
    assert float(partial[header.index("Retrieval")]) == pytest.approx(np.mean(retrieval) * 100, abs=0.005)
    assert partial[-1] == "40" and "Source" in header


def test_benchmark_aggregate_by_hand():
    bench = benchmark(ENG_V2)
    scores = {task: float(i) for i, task in enumerate(bench.tasks)}
    by_type: dict[str, list[float]] = {}
    for task, kind in bench.tasks.items():
        by_type.setdefault(kind, []).append(scores[task])
    means = {k: sum(v) / len(v) for k, v in by_type.items()}
    got = bench.aggregate(scores)
    assert got[MEAN_TASK] == pytest.approx(sum(range(41)) / 41)
    assert got[MEAN_TASK_TYPE] == pytest.approx(sum(means.values()) / len(means))
    assert {k: got[k] for k in means} == pytest.approx(means)
    assert len(means) == 7  # Classification, Clustering, PairClassification, Reranking, Retrieval, STS, Summarization


def test_list_tasks_mteb_lists_mtebs_benchmarks_and_tasks_offline(capsys):
    from benchharness.cli import main

    assert main(["list", "tasks", "--mteb"]) == 0
    out = capsys.readouterr().out
    assert f"| mteb:{ENG_V2}" in out and "| mteb:STS22.v2 " in out
    assert f"{len(mteb.get_benchmarks())} benchmarks" in out


def test_imported_rows_sit_beside_the_sts_tasks_whose_protocol_equals_mtebs(tmp_path):
    """minilm-l6's stored STS12 and STS16 (SentEval's protocol, which equals mteb's), exported and read
    back: the published row beside the measured one carries the same numbers; STS-B (SentEval's
    tokenized copy, not mteb's text) stays empty."""
    from benchharness.core.results import ResultStore
    from benchharness.mteb_bridge.export import export_results
    from benchharness.mteb_bridge.published import read
    from benchharness.reporting.leaderboard import build
    from tests.helpers import ROOT

    store = ResultStore(ROOT / "results")
    stored = [store.load("minilm-l6", t) for t in ("STS12", "STS16", "STSBenchmark")]
    export_results(stored, tmp_path)
    (model,) = read(tmp_path / "results")  # the results folder itself is accepted too
    assert model.name == "sentence-transformers/all-MiniLM-L6-v2"
    board = build(store, None, encoders=None, tasks={"STS12", "STS16", "STSBenchmark"}, imported=[model])
    (table,) = [t for t in board.tables if any(line.imported for line in t.lines)]
    by_name = {line.encoder: line for line in table.lines}
    imported = by_name[model.name]
    assert imported.group == "published" and imported.source.startswith("published: mteb results")
    cells = dict(zip(table.headers, imported.cells))
    for task, result in zip(("STS12", "STS16"), stored):
        header = next(c.header for c in table.section.columns if c.task == task)
        assert cells[header].value == pytest.approx(result.main_score, abs=1e-9)
    header = next(c.header for c in table.section.columns if c.task == "STSBenchmark")
    assert cells[header].value is None and board.imported == (str(tmp_path / "results"),)
    assert board.published_rows == 0  # no paper's row: the imported one is not counted as one
