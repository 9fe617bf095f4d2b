"""Tasks declared from files: each score against scipy/sklearn or hand counts on the same vectors,
the errors naming file and line, and the whole path through the command line."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score

from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.results import Result, ResultStore
from benchharness.core.task import Evaluation
from benchharness.reporting.leaderboard import FILE_PROTOCOL_PREFIX, build
from benchharness.reporting.table_formats import markdown
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from benchharness.tasks.files.pairs import PAIRS_PROTOCOL
from tests.fakes import HashEncoder

#: common English words, so that GloVe knows them; gold scores graded, never a perfect ranking
PAIRS = [
    ("a man is playing a guitar", "a man plays the guitar", 4.8),
    ("a woman is cutting an onion", "a woman is slicing an onion", 4.5),
    ("the cat sat on the mat", "a dog ran in the park", 0.4),
    ("children are playing in the water", "kids play in the water", 4.2),
    ("a man is riding a horse", "a woman is eating food", 0.2),
    ("the sun is shining today", "it is a bright day", 3.5),
    ("the car is red", "the house is blue", 1.0),
    ("he is reading a book", "she is writing a letter", 1.6),
    ("the train left the city", "the train arrived in the city", 2.5),
    ("a bird is flying over the sea", "a bird flies above the water", 4.0),
    ("the children are sleeping", "the baby is asleep", 3.0),
    ("people are walking in the street", "a crowd walks down the road", 3.8),
    ("the dog is barking", "the dog is sleeping", 2.0),
    ("we like to eat bread", "they want to drink water", 0.8),
    ("the old man is sitting", "an old man sits on a chair", 4.1),
    ("music is playing loudly", "the room is quiet", 0.6),
]
#: text a CSV must quote, and quotes a TSV keeps as they are
TRICKY = [('well, he said "yes"', "she said no, twice", 1.5), ('the "old" house', "a new house", 2.2)]


@pytest.fixture(autouse=True)
def no_registrations(monkeypatch):
    """Each test starts and ends with no task declared from Python."""
    monkeypatch.setattr(declarations, "REGISTERED", {})


@pytest.fixture
def one_thread():
    """Tiny classifiers on a shared CPU: one torch thread avoids oversubscription stalls."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_pairs(path: Path, pairs, columns=("sentence1", "sentence2", "score")) -> Path:
    rows = [dict(zip(columns, p)) for p in pairs]
    if path.suffix in (".jsonl", ".json"):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".csv":
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    else:  # TSV: one record per line, literal text
        path.write_text("\t".join(columns) + "\n" + "".join("\t".join(map(str, p)) + "\n" for p in pairs))
    return path


def numpy_cosines(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    u, v = u.astype(np.float64), v.astype(np.float64)
    return (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))


def expected_correlations(encoder, pairs) -> tuple[float, float, np.ndarray]:
    """Spearman and Pearson x100 (scipy) of the numpy cosines of the encoder's vectors."""
    a, b, gold = zip(*pairs)
    cos = numpy_cosines(encoder.encode(list(a)), encoder.encode(list(b)))
    return 100 * spearmanr(cos, gold)[0], 100 * pearsonr(cos, gold)[0], cos


def loaded(name: str, data_root: DataRoot | None = None):
    task = tasks.get(name)
    task.load(data_root or DataRoot("/nonexistent-data-root"))  # a file task never reads the data root
    return task


# ------------------------------------------------------------------------------------------------
# pairs


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_pair_file_scores_are_scipys_on_numpy_cosines(tmp_path, suffix):
    pairs = PAIRS + TRICKY
    path = write_pairs(tmp_path / f"pairs{suffix}", pairs)
    register_file_task("my-pairs", path, score_range=[0, 5])
    task = loaded("my-pairs")
    encoder = HashEncoder(dim=16)
    evaluation = task.evaluate_items(encoder.encode, 1111)
    spearman, pearson, cos = expected_correlations(encoder, pairs)
    assert evaluation.metrics["spearman"] == pytest.approx(spearman, abs=1e-9)
    assert evaluation.metrics["pearson"] == pytest.approx(pearson, abs=1e-9)
    assert evaluation.metrics["n"] == len(pairs) == task.metadata.n_samples
    assert evaluation.kind == "sts"
    np.testing.assert_allclose(evaluation.items["cosine"], cos, atol=1e-12)
    np.testing.assert_array_equal(evaluation.items["gold"], [g for _, _, g in pairs])
    # the encoder gets the text exactly as written, quotes and commas included
    assert task.sentences() == [a for a, _, _ in pairs] + [b for _, b, _ in pairs]
    assert task.files == [path.resolve()]
    meta = task.metadata
    assert (meta.main_score, meta.split, meta.groups) == ("spearman", "all", ("files",))
    assert meta.protocol.startswith(FILE_PROTOCOL_PREFIX)  # what the leaderboard looks for
    assert meta.protocol_details["score_range"] == [0, 5] and meta.protocol_details["file"] == path.name


def test_named_columns_and_explicit_format(tmp_path):
    path = write_pairs(tmp_path / "pairs.csv", PAIRS, columns=("left", "right", "gold")).rename(tmp_path / "pairs.txt")
    register_file_task("my-pairs", path, format="csv", sentence1="left", sentence2="right", score="gold")
    encoder = HashEncoder(dim=16, salt="x")
    metrics = loaded("my-pairs").evaluate(encoder.encode, 1111)
    assert metrics["spearman"] == pytest.approx(expected_correlations(encoder, PAIRS)[0], abs=1e-9)


@pytest.mark.usefixtures("data_dir")
def test_stsb_pairs_from_a_file_score_as_the_builtin_task(tmp_path, data_dir):
    builtin = loaded("STSBenchmark", DataRoot(data_dir))
    a, b, gold = builtin.subsets["test"]
    pairs = list(zip(a, b, gold.tolist()))
    register_file_task("my-stsb", write_pairs(tmp_path / "stsb.jsonl", pairs))
    encoder = HashEncoder(dim=16)
    ours = loaded("my-stsb").evaluate(encoder.encode, 1111)
    spearman, pearson, _ = expected_correlations(encoder, pairs)
    assert ours["spearman"] == pytest.approx(spearman, abs=1e-9) and ours["pearson"] == pytest.approx(pearson, abs=1e-9)
    assert ours == builtin.evaluate(encoder.encode, 1111)


# ------------------------------------------------------------------------------------------------
# labelled sentences

COLOURS = ("red", "green", "blue")


def colour_vectors(sentences: list[str]) -> np.ndarray:
    """A fake encoder that separates the classes: noise, plus 10 on the dimension of the sentence's
    colour (its first word)."""
    rows = []
    for s in sentences:
        v = np.random.default_rng(int(hashlib.md5(s.encode()).hexdigest()[:8], 16)).normal(size=16)
        v[COLOURS.index(s.split()[0])] += 10.0
        rows.append(v)
    return np.array(rows, dtype=np.float32)


@pytest.mark.usefixtures("one_thread")
def test_three_class_file_runs_mr_protocol(tmp_path):
    rows = [{"text": f"{c} thing number {i}", "colour": c} for i in range(100) for c in COLOURS]
    path = tmp_path / "colours.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["text", "colour"])
        writer.writeheader()
        writer.writerows(rows)
    register_file_task("my-colours", path, kind="labels", text="text", label="colour")
    task = loaded("my-colours")
    evaluation = task.evaluate_items(colour_vectors, 1111)
    items = evaluation.items
    classes = sorted(COLOURS)  # blue, green, red
    assert task.metadata.protocol_details["labels"] == classes
    assert evaluation.kind == "classification" and len(items["pred"]) == len(rows) == task.metadata.n_samples
    np.testing.assert_array_equal(items["gold"], [classes.index(r["colour"]) for r in rows])
    assert set(items["fold"]) == set(range(10))  # the default config's 10 outer folds
    # the score is SentEval's: the mean of the outer folds' accuracies (each rounded to 2 decimals)
    by_fold = [
        round(100 * float(np.mean(items["pred"][items["fold"] == f] == items["gold"][items["fold"] == f])), 2)
        for f in range(10)
    ]
    assert evaluation.metrics["acc"] == pytest.approx(np.mean(by_fold), abs=0.006)
    # a sane range: far above chance (33%), near what scikit-learn's logistic regression gets
    x, y = colour_vectors([r["text"] for r in rows]), [r["colour"] for r in rows]
    reference = (
        100
        * cross_val_score(
            LogisticRegression(max_iter=1000), x, y, cv=StratifiedKFold(10, shuffle=True, random_state=1111)
        ).mean()
    )
    assert reference > 95 and evaluation.metrics["acc"] > reference - 15


def test_integer_labels_sort_as_numbers(tmp_path):
    labels = ["10", "2", "9"] * 10
    path = tmp_path / "numbers.tsv"
    path.write_text("sentence\tlabel\n" + "".join(f"sentence {i}\t{lab}\n" for i, lab in enumerate(labels)))
    register_file_task("my-numbers", path, kind="labels")
    task = loaded("my-numbers")
    assert task.metadata.protocol_details["labels"] == [2, 9, 10]
    assert list(task.labels) == [{"2": 0, "9": 1, "10": 2}[lab] for lab in labels]


# ------------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    "name,content,kind,options,line,fragment",
    [
        ("missing.csv", "sentence1,sentence2,gold\na,b,1\n", "pairs", {}, 1, "no column 'score'"),
        (
            "missing.jsonl",
            '{"sentence1": "a", "sentence2": "b", "score": 1}\n\n{"sentence1": "a", "score": 2}\n',
            "pairs",
            {},
            3,
            "no key 'sentence2'",
        ),
        (
            "bad.csv",
            "sentence1,sentence2,score\na,b,1\nc,d,high\n",
            "pairs",
            {},
            3,
            "'high' in 'score' is not a number",
        ),
        (
            "range.tsv",
            "sentence1\tsentence2\tscore\na\tb\t1\nc\td\t2\ne\tf\t7.5\n",
            "pairs",
            {"score_range": [0, 5]},
            4,
            "outside score_range [0, 5]",
        ),
        ("empty.csv", "sentence1,sentence2,score\na,b,1\n,d,2\n", "pairs", {}, 3, "non-empty text"),
        (
            "label.jsonl",
            '{"sentence": "a", "label": "x"}\n{"sentence": "b", "label": 1.5}\n',
            "labels",
            {},
            2,
            "label 1.5",
        ),
        ("label.csv", "sentence,label\na,x\nb,\n", "labels", {}, 3, "label ''"),
    ],
)
def test_errors_name_the_file_and_line(tmp_path, name, content, kind, options, line, fragment):
    path = tmp_path / name
    path.write_text(content)
    register_file_task("broken", path, kind=kind, **options)
    with pytest.raises(DataError) as caught:
        loaded("broken")
    message = str(caught.value)
    assert message.startswith(f"{path.resolve()}:{line}: ") and fragment in message and "\n" not in message


@pytest.mark.parametrize("labels,fragment", [(["x"] * 20, "1 class(es)"), (["x"] * 20 + ["y"] * 3, "'y' has 3")])
def test_too_few_classes_or_class_members(tmp_path, labels, fragment):
    path = tmp_path / "few.jsonl"
    path.write_text("".join(json.dumps({"sentence": f"s {i}", "label": lab}) + "\n" for i, lab in enumerate(labels)))
    register_file_task("few", path, kind="labels")
    with pytest.raises(DataError, match=re.escape(fragment)) as caught:
        loaded("few")
    assert str(path.resolve()) in str(caught.value)


def test_a_missing_file_is_listed_and_fails_on_load(tmp_path):
    path = tmp_path / "nowhere.csv"
    register_file_task("gone", path)
    assert "cannot read" in tasks.get("gone").metadata.description
    with pytest.raises(DataError, match="No such file") as caught:
        loaded("gone")
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    "name,options,fragment",
    [
        ("STSBenchmark", {}, "task 'STSBenchmark' of the 'sts' task plugin"),
        ("sick-r", {}, "alias 'SICK-R'"),
        ("transfer", {}, "group 'transfer'"),
        ("files", {}, "group 'files'"),
        ("a/b", {}, "letters, digits"),
        ("a" * 151, {}, "task name of 151 characters; use at most 150"),
        ("ok", {"scor": "x"}, "unknown key(s) scor"),
        ("ok", {"kind": "triples"}, "kind 'triples'"),
        ("ok", {"score_range": [5, 0]}, "score_range [5, 0]"),
    ],
)
def test_bad_declarations_are_refused(tmp_path, name, options, fragment):
    with pytest.raises(InvalidInputError, match=re.escape(fragment)):
        register_file_task(name, tmp_path / "p.csv", **options)


def test_leaderboard_shows_file_tasks_even_where_no_paired_test_is_defined(tmp_path):
    """A perfect correlation (Steiger's test is undefined) and a result on an edited file (other
    items) leave their cells unmarked instead of failing the leaderboard."""
    gold = np.array([0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 4.5, 5.0])
    noisy = gold + np.array([0.9, -0.8, 0.7, -0.6, 0.5, -0.9, 0.8, -0.7])
    runs = {"perfect": (gold / 5, gold), "noisy": (noisy / 5, gold), "edited": (gold[:6] / 5, gold[:6] + 0.1)}
    store = ResultStore(tmp_path)
    for encoder, (cos, g) in runs.items():
        score = 100 * spearmanr(cos, g)[0]
        result = Result(
            encoder=encoder,
            task="my-pairs",
            main_score=score,
            main_metric="spearman",
            metrics={"spearman": score},
            protocol={"variant": PAIRS_PROTOCOL},
            encoder_identity={"hash": encoder},
            encoder_metadata={},
            data={"sha256": encoder, "root": "", "files": ["pairs.csv"], "verified": True},
            seed=1111,
            timings={},
            versions={},
            date="today",
        )
        items = {"cosine": cos, "gold": g, "subset": np.zeros(len(g), np.int16), "subset_names": np.array(["test"])}
        store.save(replace(result, per_item=Evaluation({}, items, "sts")))
    board = markdown(build(store, None)).split("## Tasks from files")[1]
    cells = {row[0]: row[2] for row in (table_rows(board, e)[0] for e in runs)}
    assert cells == {e: f"{100 * spearmanr(cos, g)[0]:.2f}" for e, (cos, g) in runs.items()}


# ------------------------------------------------------------------------------------------------
# end to end through the command line


def configure(project: Path, files: Path) -> None:
    """The project's benchharness.toml declares one task of each kind, on files in another folder."""
    rel = os.path.relpath(files, project)
    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n'
        f'[tasks.my-pairs]\nfile = "{rel}/pairs.csv"\nscore_range = [0, 5]\n\n'
        f'[tasks.my-labels]\nkind = "labels"\nfile = "{rel}/topics.jsonl"\n'
    )


TOPICS = {
    "animal": "dog cat horse bird cow fish sheep lion tiger bear wolf duck",
    "food": "bread cheese rice soup apple cake meat pizza salad fruit pasta egg",
    "weather": "rain snow wind storm sun cloud fog heat cold ice thunder frost",
}


def topic_rows() -> list[dict[str, str]]:
    """Twelve sentences of each of three topics: enough for the default config's 10-fold."""
    frames = ["the {} is here", "i saw the {} today", "there was a {} outside", "we talked about the {}"]
    return [
        {"sentence": frames[i % 4].format(word), "label": topic}
        for topic, words in TOPICS.items()
        for i, word in enumerate(words.split())
    ]


def table_rows(text: str, first: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first} ")
    ]


def stored(project: Path, encoder: str, task: str) -> dict:
    return json.loads((project / "results" / encoder / f"{task}.json").read_text())


@pytest.mark.usefixtures("one_thread")
def test_declared_tasks_run_compare_list_and_rank_through_the_cli(project, tmp_path_factory, capsys):
    from benchharness.cli import main
    from benchharness.evaluation.resolver import Resolver

    files = tmp_path_factory.mktemp("researcher-files")
    write_pairs(files / "pairs.csv", PAIRS)
    (files / "topics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in topic_rows()))
    configure(project, files)

    assert main(["list", "tasks"]) == 0
    listed = capsys.readouterr().out
    assert table_rows(listed, "my-pairs")[0][1:6] == ["files", "all", "spearman", "file-pairs-cosine", str(len(PAIRS))]
    assert table_rows(listed, "my-labels")[0][1:6] == [
        "files",
        "all",
        "acc",
        "file-senteval-logreg-default",
        str(len(topic_rows())),
    ]

    run = ["run", "--encoders", "glove-50d", "--tasks", "my-pairs,my-labels", "--quiet", "--no-cache"]
    assert main(run) == 0
    glove = Resolver().get("glove-50d")
    spearman, _, _ = expected_correlations(glove, PAIRS)
    pairs_result = stored(project, "glove-50d", "my-pairs")
    assert pairs_result["main_score"] == pytest.approx(spearman, abs=1e-9)
    assert pairs_result["data"]["files"] == ["pairs.csv"] and pairs_result["items"]["n"] == len(PAIRS)
    labels_result = stored(project, "glove-50d", "my-labels")
    assert labels_result["data"]["files"] == ["topics.jsonl"] and labels_result["items"]["n"] == len(topic_rows())
    assert labels_result["protocol"]["labels"] == ["animal", "food", "weather"]

    # another file, another digest: a stale result is recomputed on the new data
    changed = [*PAIRS[:-1], (PAIRS[-1][0], PAIRS[-1][1], 2.9)]
    write_pairs(files / "pairs.csv", changed)
    assert main([*run[:4], "my-pairs", "--quiet", "--no-cache", "--overwrite", "stale"]) == 0
    rerun = stored(project, "glove-50d", "my-pairs")
    assert rerun["data"]["sha256"] != pairs_result["data"]["sha256"]
    assert rerun["main_score"] == pytest.approx(expected_correlations(glove, changed)[0], abs=1e-9)

    assert main(["run", "--encoders", "glove-50d+whitening", "--tasks", "my-pairs", "--quiet", "--no-cache"]) == 0
    whitened = stored(project, "glove-50d+whitening", "my-pairs")["main_score"]
    capsys.readouterr()
    assert main(["compare", "glove-50d", "glove-50d+whitening", "--tasks", "my-pairs"]) == 0
    row = table_rows(capsys.readouterr().out, "my-pairs")[0]
    assert row[1:4] == [f"{rerun['main_score']:.2f}", f"{whitened:.2f}", f"{rerun['main_score'] - whitened:+.2f}"]

    assert main(["leaderboard"]) == 0
    board = capsys.readouterr().out.split("## Tasks from files")[1]
    header = next(line for line in board.splitlines() if line.startswith("| Encoder"))
    # the columns in the order the configuration declares the tasks (the task catalogue's)
    assert [c.strip() for c in header.strip("|").split("|")][2:] == ["my-pairs", "my-labels"]
    assert table_rows(board, "glove-50d")[0][2:] == [f"{rerun['main_score']:.2f}", f"{labels_result['main_score']:.2f}"]


def test_a_table_that_takes_a_builtin_name_is_left_out_with_a_warning_naming_both(project, capsys):
    """A table named as a built-in task stops nothing: the name keeps meaning the built-in task
    (whose results it names) and the warning says which table is left out and why."""
    from benchharness.cli import main

    write_pairs(project / "mine.csv", PAIRS)
    (project / "benchharness.toml").write_text('[tasks.MR]\nfile = "mine.csv"\n[tasks.mine]\nfile = "mine.csv"\n')
    assert main(["list", "tasks"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if "[tasks.MR]" in line]
    assert len(warnings) == 1 and "'transfer' task plugin" in warnings[0] and "left out" in warnings[0]
    assert table_rows(captured.out, "MR")[0][1] == "transfer"  # the built-in, not the file
    assert table_rows(captured.out, "mine")[0][1] == "files"
