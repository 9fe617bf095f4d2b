"""Issue #34, inputs and messages: bad input a user can fix is named in one line (the file, the value,
what to do) with no traceback or warning, no NaN becomes a score, every output path is checked before
any work starts, and ``run --verify`` writes nothing. Findings seen on the command line are tested
there, in a subprocess."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import math
import os
import shlex
from pathlib import Path

import numpy as np
import pytest

from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.results import ResultStore
from benchharness.core.task import TaskProvider
from benchharness.data.readers import STSB_COLUMNS, read_scored_tsv
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.scoring.metrics import UndefinedCorrelationError, correlations
from tests.fakes import BrokenTask, HashEncoder
from tests.helpers import DATA, cli, cli_process, needs_data

TASK = "SICKRelatedness-trial"  # 500 pairs: the smallest STS task
GLOVE_SUBSET = "glove/glove.6B.50d.subset.txt.gz"


def only_error_line(rc: int, out: str) -> str:
    """The message of a command that failed as a user error: exit 2, one line in all it printed, no traceback."""
    assert rc == 2, out
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("benchharness: error: "), out
    return lines[0]


def no_noise(out: str) -> None:
    assert "Traceback" not in out and "Warning" not in out and "nan" not in out.lower(), out


def snapshot(*folders: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``folders``: its mtime and content."""
    return {
        str(p): (p.stat().st_mtime_ns, p.read_bytes())
        for f in folders
        if f.exists()
        for p in sorted(f.rglob("*"))
        if p.is_file()
    }


# --- item 4: constant gold scores, constant predictions, no NaN score ---------------------------------


def test_a_pairs_file_with_constant_gold_scores_fails_in_one_line_naming_it(project):
    pairs = project / "flat.csv"
    pairs.write_text(
        "sentence1,sentence2,score\n" + "".join(f"a man walks {i},a man runs {i},3.0\n" for i in range(30))
    )
    (project / "benchharness.toml").write_text('[paths]\ncache_dir = ".cache"\n\n[tasks.flat]\nfile = "flat.csv"\n')
    rc, out = cli(project, "run", "--encoders", "glove-50d", "--tasks", "flat", "--no-cache").outcome
    assert rc == 1, out
    assert f"gold scores are all 3.0 in {pairs}: a correlation with a constant is undefined" in out
    assert "encoding" not in out  # refused when the task loads, before any sentence is encoded
    no_noise(out)
    assert not list(project.rglob("*.json"))


@needs_data(GLOVE_SUBSET)
def test_an_encoder_giving_every_sentence_the_same_vector_is_named_as_such(project, data_dir):
    task = tasks.get(TASK)
    task.load(DataRoot(data_dir))
    words = sorted({w for s in task.sentences() for w in s.lower().split()})
    vectors = project / "same.txt"
    vectors.write_text("".join(f"{w} 0.5 0.5\n" for w in words))  # every sentence averages to (0.5, 0.5)
    rc, out = cli(project, "run", "--encoders", f"glove:{vectors}", "--tasks", TASK, "--no-cache").outcome
    assert rc == 1, out
    assert (
        f"the cosines are all 1 on {TASK}: the encoder scores every pair alike (the same vector for every "
        "sentence?); a correlation with a constant is undefined"
    ) in out
    no_noise(out)
    assert not list((project / "results").rglob("*.json"))


def test_correlations_refuse_a_constant_side_or_a_nan_instead_of_returning_nan():
    gold = np.array([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(UndefinedCorrelationError, match=r"the predicted similarities are all 0.5: a correlation"):
        correlations(np.full(4, 0.5), gold)
    with pytest.raises(UndefinedCorrelationError, match=r"the gold scores are all 3.0: a correlation"):
        correlations(gold, np.full(4, 3.0))
    with pytest.raises(UndefinedCorrelationError, match=r"predicted similarities hold 1 non-finite"):
        correlations(np.array([0.1, np.nan, 0.3, 0.2]), gold)


@pytest.mark.parametrize("stored", [True, False])
def test_a_nan_metric_fails_its_task_alone_and_is_never_reported_or_stored(data_dir, tmp_path, register_plugin, stored):
    class NaNTask(BrokenTask):
        def evaluate(self, embed, seed):
            return {"x": float("nan"), "n": 1}

    register_plugin("tasks", "nan", TaskProvider(tasks={"Broken": NaNTask}))
    store = ResultStore(tmp_path) if stored else None
    encoder = HashEncoder()
    summary = run(
        [encoder.name],
        [tasks.get("Broken"), tasks.get(TASK)],
        lambda _: encoder,
        DataRoot(data_dir),
        store,
        RunSettings(),
    )
    outcomes = {o.task: o for o in summary.outcomes}
    assert outcomes["Broken"].status == "failed" and outcomes["Broken"].main_score is None
    assert "x = nan: the task gave no defined score" in outcomes["Broken"].message
    assert outcomes[TASK].status == "computed" and math.isfinite(outcomes[TASK].main_score)
    assert not (tmp_path / "hash" / "Broken.json").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e999"])
def test_a_stored_non_finite_main_score_is_recomputed_not_reused(project, value):
    assert cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache").outcome[0] == 0
    path = project / "results" / "glove-50d" / f"{TASK}.json"
    good = json.loads(path.read_text())["main_score"]
    path.write_text(path.read_text().replace(f'"main_score": {json.dumps(good)}', f'"main_score": {value}'))
    rc, out = cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache").outcome
    assert rc == 0, out
    assert str(path) in out and "recomputing" in out and "Traceback" not in out
    assert json.loads(path.read_text())["main_score"] == good  # the same code computes the same score


def test_a_gold_score_that_parses_as_nan_or_inf_is_refused_naming_the_line(tmp_path):
    rows = ["genre\tfile\t2012\t0001\t4.0\ta cat\ta dog", "genre\tfile\t2012\t0002\tnan\ta man\ta boy"]
    for bad in ("nan", "inf", "-Infinity"):
        path = tmp_path / "sts.csv"
        path.write_text("\n".join(rows).replace("\tnan\t", f"\t{bad}\t") + "\n")
        with pytest.raises(DataError, match=rf"sts.csv:2: gold score '{bad}' is not a number"):
            read_scored_tsv(path, STSB_COLUMNS, header=False)


# --- weak: damaged result and items files -----------------------------------------------------------------


def test_a_deeply_nested_result_file_is_named_in_one_line(project):
    path = project / "results" / "glove-50d" / f"{TASK}.json"
    path.parent.mkdir(parents=True)
    path.write_text("[" * 200_000 + "]" * 200_000)
    line = only_error_line(*cli(project, "compare", "glove-50d", "glove-50d", "--tasks", TASK).outcome)
    assert str(path) in line and "nested too deeply" in line


@needs_data(GLOVE_SUBSET)
def test_an_object_array_items_file_is_refused_naming_it_and_never_unpickled(project, data_dir):
    other = f"glove:{data_dir / GLOVE_SUBSET}"
    assert cli(project, "run", "--encoders", f"glove-50d,{other}", "--tasks", TASK, "--no-cache").outcome[0] == 0
    path = project / "results" / "glove-50d" / f"{TASK}.json"
    record = json.loads(path.read_text())
    items = path.with_name(record["items"]["file"])
    buffer = io.BytesIO()
    marker = project / "unpickled"
    np.savez(buffer, cosine=np.array([Unpickled(str(marker))], dtype=object))
    items.write_bytes(buffer.getvalue())
    record["items"]["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    path.write_text(json.dumps(record))
    line = only_error_line(*cli(project, "compare", "glove-50d", other, "--tasks", TASK).outcome)
    assert str(items) in line and "Object arrays cannot be loaded" in line
    assert not marker.exists()


def _two_stored_encoders(project) -> tuple[str, Path, dict]:
    """glove-50d and a glove subset stored on TASK with their items: the other encoder's name, and
    glove-50d's result file and record."""
    with gzip.open(DATA / GLOVE_SUBSET, "rt", encoding="utf8") as fh:
        (project / "small.txt").write_text("".join(next(fh) for _ in range(3000)))
    other = f"glove:{project / 'small.txt'}"
    assert cli(project, "run", "--encoders", f"glove-50d,{other}", "--tasks", TASK, "--no-cache").outcome[0] == 0
    path = project / "results" / "glove-50d" / f"{TASK}.json"
    return other, path, json.loads(path.read_text())


@needs_data(GLOVE_SUBSET)
@pytest.mark.parametrize(
    ("key", "value"),
    [("file", "../../etc/passwd"), ("file", "/etc/passwd"), ("file", ".."), ("file", 5), ("sha256", None)],
)
def test_a_damaged_items_record_is_named_in_one_line(project, key, value):
    other, path, record = _two_stored_encoders(project)
    record["items"][key] = value
    path.write_text(json.dumps(record))
    line = only_error_line(*cli(project, "compare", "glove-50d", other, "--tasks", TASK).outcome)
    assert f"{path}: its items record is damaged ({key!r} is {json.dumps(value)})" in line


@needs_data(GLOVE_SUBSET)
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda a: a["cosine"].astype(str), "'cosine' holds <U32 values, not numbers"),  # would rank as text
        (lambda a: np.where(np.arange(len(a["cosine"])) == 0, np.nan, a["cosine"]), "'cosine' holds 1 non-finite"),
        (lambda a: a["cosine"].reshape(-1, 1), "'cosine' has shape (500, 1)"),
    ],
)
def test_items_arrays_that_benchharness_never_writes_are_refused_naming_the_file(project, change, expected):
    other, path, record = _two_stored_encoders(project)
    items = path.with_name(record["items"]["file"])
    arrays = dict(np.load(items))
    arrays["cosine"] = change(arrays)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    items.write_bytes(buffer.getvalue())
    record["items"]["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    path.write_text(json.dumps(record))
    line = only_error_line(*cli(project, "compare", "glove-50d", other, "--tasks", TASK).outcome)
    assert f"{items}: not per-item outputs benchharness wrote ({expected}" in line


def test_a_fifo_in_place_of_a_result_manifest_or_digest_store_does_not_hang_a_run(project):
    runs = project / "runs"
    (project / "results" / "glove-50d").mkdir(parents=True)
    (runs / "fifo").mkdir(parents=True)
    (project / ".cache").mkdir()
    result = project / "results" / "glove-50d" / f"{TASK}.json"
    for fifo in (result, runs / "fifo" / "manifest.json", project / ".cache" / "digests.json"):
        os.mkfifo(fifo)
    # a fresh process: a read that blocked on a fifo would hang it, not the test session
    done = cli_process(
        project, "run", "--encoders", "glove-50d", "--tasks", TASK, env={"BENCHHARNESS_RUNS": str(runs)}, timeout=120
    )
    rc, out = done.returncode, done.stdout + done.stderr
    assert rc == 0 and f"{result}: not a regular file; delete it to recompute; recomputing" in out, out
    assert json.loads(result.read_text())["task"] == TASK


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'[paths]\ncache_dir = "\xff"\n', "invalid TOML: 'utf-8' codec can't decode byte 0xff"),
        (b"x = " + b"[" * 5000 + b"]" * 5000, "invalid TOML: nested too deeply to read"),
    ],
)
def test_a_config_file_that_is_not_utf8_or_nested_too_deeply_is_one_line(project, content, expected):
    (project / "benchharness.toml").write_bytes(content)
    line = only_error_line(*cli(project, "list", "tasks").outcome)
    assert f"{project / 'benchharness.toml'}: {expected}" in line


def test_a_deeply_nested_run_manifest_breaks_only_its_own_name(project):
    runs = project / "runs"
    (runs / "deep").mkdir(parents=True)
    (runs / "deep" / "manifest.json").write_text("[" * 200_000 + "]" * 200_000)
    env = {"BENCHHARNESS_RUNS": str(runs)}
    rc, out = cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache", env=env).outcome
    assert rc == 0 and "Traceback" not in out, out
    line = only_error_line(*cli(project, "run", "--encoders", str(runs / "deep"), "--tasks", TASK, env=env).outcome)
    assert f"{runs / 'deep' / 'manifest.json'}: not a benchharness run manifest" in line


class Unpickled:
    """An object whose unpickling would leave a file behind: proof that nothing was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path(self.path).touch, ())


# --- weak: a word2vec text file ---------------------------------------------------------------------


@needs_data(GLOVE_SUBSET)
def test_a_word2vec_header_is_read_as_one_and_checked_against_the_body(project):
    with gzip.open(DATA / GLOVE_SUBSET, "rt", encoding="utf8") as fh:
        lines = [next(fh) for _ in range(5000)]
    plain, w2v, short = project / "plain.txt", project / "w2v.txt", project / "short.txt"
    plain.write_text("".join(lines))
    w2v.write_text("5000 50\n" + "".join(line.rstrip("\n") + " \n" for line in lines))  # the C tool's spaces
    short.write_text("6000 50\n" + "".join(lines))
    rc, out = cli(project, "run", "--encoders", f"glove:{plain},glove:{w2v}", "--tasks", TASK, "--no-cache").outcome
    assert rc == 0, out
    scores = {
        p: json.loads(next((project / "results").glob(f"*{p.stem}*/{TASK}.json")).read_text())["main_score"]
        for p in (plain, w2v)
    }
    assert scores[plain] == scores[w2v]
    rc, out = cli(project, "run", "--encoders", f"glove:{short}", "--tasks", TASK, "--no-cache").outcome
    assert rc == 1 and f"{short}:5001: 5000 vectors, but the word2vec header on line 1 says 6000" in out, out
    assert "Traceback" not in out


# --- item 7: every output path checked before any work ----------------------------------------------

OUTPUTS = [  # (command words, with FILE a file and DIR a folder; the words the one line holds)
    (["run", "--encoders", "glove-50d", "--tasks", TASK, "--results-dir", "FILE"], "--results-dir FILE is a file"),
    (["analyze", "glove-50d", "--out", "FILE"], "--out FILE is a file; give a folder"),
    (["analyze", "glove-50d", "--out", "FILE/sub"], "--out FILE/sub: FILE is a file, not a folder"),
    (["protocols", "glove-50d", "-o", "DIR"], "--output DIR is a folder; give a file name"),
    (["data", "download", "glove", "--data-dir", "FILE"], "the glove folder FILE/glove: FILE is a file"),
    (["data", "migrate", "--results-dir", "FILE"], "--results-dir FILE is a file; give a folder"),
    (["data", "migrate", "--cache-dir", "FILE"], "--cache-dir FILE is a file; give a folder"),
    (["train", "simcse", "--out", "FILE"], "--out FILE is a file; give a folder"),
    (["train", "simcse", "--out", "FILE", "--seeds", "1,2"], "--out FILE-s1 is a file; give a folder"),
    (["train", "simcse"], "the runs folder FILE is a file; give a folder"),
    (["tune", "whitening", "--encoder", "glove-50d"], "the runs folder FILE is a file; give a folder"),
    (["leaderboard", "-o", "DIR"], "--output DIR is a folder; give a file name"),
    (["leaderboard", "-o", "FILE/board.md"], "--output FILE/board.md: FILE is a file, not a folder"),
    (["report", "--out", "FILE"], "--out FILE is a file; give a folder"),
    (["export", "mteb", "--out", "FILE"], "--out FILE is a file; give a folder"),
    (["push", "glove-50d", "--stage-only", "--stage", "FILE"], "--stage FILE is a file; give a folder"),
]


@pytest.mark.parametrize(("words", "expected"), OUTPUTS, ids=[" ".join(w) for w, _ in OUTPUTS])
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(project, words, expected):
    if words[:2] == ["export", "mteb"] and importlib.util.find_spec("mteb") is None:
        pytest.skip("needs the 'mteb' extra: export mteb asks for it before it looks at --out")
    afile, adir = project / "afile", project / "adir"
    afile.write_text("a file")
    (project / "afile-s1").write_text("a file")
    adir.mkdir()
    subs = {"FILE": str(afile), "DIR": str(adir)}
    args = [next((w.replace(k, v) for k, v in subs.items() if k in w), w) for w in words]
    rc, out = cli(project, *args, env={"BENCHHARNESS_RUNS": str(afile)}).outcome
    line = only_error_line(rc, out)
    assert expected.replace("FILE", str(afile)).replace("DIR", str(adir)) in line
    assert afile.read_text() == "a file" and not any(adir.iterdir())
    assert not (project / "results").exists() and not (project / ".cache").exists()


@pytest.mark.parametrize("where", ["/proc", "/sys", "locked"])
def test_an_output_under_a_folder_no_file_can_be_created_in_is_refused_before_any_work(project, where):
    """Tried, not read from permission bits: root (these tests' user here) passes ``os.access``, yet
    cannot create a file in /proc or /sys; a user without write permission cannot in ``locked``."""
    parent = Path(where) if where.startswith("/") else project / where
    if where == "locked":
        parent.mkdir(mode=0o555)
        if os.geteuid() == 0:
            pytest.skip("root writes in a folder without write permission")
    line = only_error_line(*cli(project, "analyze", "glove-50d", "--out", str(parent / "benchharness-out")).outcome)
    assert f"--out {parent / 'benchharness-out'}: cannot write it, {parent} is not writable (" in line
    assert not (project / ".cache").exists()  # refused before any encoding


# --- items 5, 6 and 10 (--verify), fixed on main: their tests -------------------------------------------


def test_run_with_a_results_dir_that_is_a_file_stops_before_encoding(project):
    (project / "afile").write_text("")
    line = only_error_line(
        *cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--no-cache", "--results-dir", "afile").outcome
    )
    assert "--results-dir afile is a file; give a folder" in line


@needs_data(GLOVE_SUBSET)
def test_the_compare_hint_run_literally_computes_every_missing_result(project):
    with gzip.open(DATA / GLOVE_SUBSET, "rt", encoding="utf8") as fh:
        (project / "small.txt").write_text("".join(next(fh) for _ in range(5000)))
    other = f"glove:{project / 'small.txt'}"
    compare = ("compare", "glove-50d", other, "--tasks", f"STS13,{TASK}")
    line = only_error_line(*cli(project, *compare).outcome)
    assert f"glove-50d on STS13, {other} on STS13, glove-50d on {TASK}, {other} on {TASK}" in line
    hint = shlex.split(line.partition("produce them with: ")[2])
    assert hint[0] == "benchharness" and cli(project, *hint[1:]).outcome[0] == 0
    rc, out = cli(project, *compare).outcome
    assert rc == 0 and "Traceback" not in out, out


def test_run_verify_leaves_the_project_and_the_user_cache_untouched(project, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, env=env).outcome[0] == 0
    remembered = [p for f in (project, tmp_path / "xdg") if f.exists() for p in f.rglob("digests.json")]
    assert remembered  # a run with a cache remembers digests
    for path in remembered:  # a cache cleared since, or results stored elsewhere: verify must not remember them
        path.unlink()
    before = snapshot(project, tmp_path / "xdg")
    rc, out = cli(project, "run", "--encoders", "glove-50d", "--tasks", TASK, "--verify", env=env).outcome
    assert rc == 0 and "reproduced" in out, out
    assert snapshot(project, tmp_path / "xdg") == before


def test_the_sts_evaluator_logs_the_pair_count_as_a_count(data_dir):
    from sentence_transformers import SentenceTransformer

    from benchharness.training.evaluators import STSEvaluator
    from tests.helpers import MINILM_L3

    metrics = STSEvaluator("SICKRelatedness-trial", data_dir=str(data_dir))(
        SentenceTransformer(MINILM_L3, device="cpu")
    )
    assert metrics["benchharness_SICKRelatedness-trial_n"] == 500  # SICK's trial split: 500 pairs
    assert 0 < metrics["benchharness_SICKRelatedness-trial_spearman"] < 1
