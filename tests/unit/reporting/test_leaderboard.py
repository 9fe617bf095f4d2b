"""Leaderboard grouping, sorting, seed aggregation, marks and intervals on synthetic result files."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import spearmanr

from benchharness.core.results import Result, ResultStore
from benchharness.core.task import Evaluation
from benchharness.reporting.leaderboard import build, sections
from benchharness.reporting.table_formats import markdown
from benchharness.scoring.stats import steiger_spearman
from benchharness.tasks import boards

STS = next(s for s in sections([]) if s.title == boards.STS.title)


def render(store, published_dir) -> str:
    """The Markdown leaderboard of ``store``, as ``benchharness leaderboard`` prints it."""
    return markdown(build(store, published_dir))


def _result(encoder, task, score, metadata=None, identity=None, confidence=None):
    return Result(
        encoder=encoder,
        task=task,
        main_score=score,
        main_metric="spearman",
        metrics={"spearman": score},
        protocol={"variant": "v"},
        encoder_identity={"hash": encoder, **(identity or {})},
        encoder_metadata=metadata or {},
        data={"sha256": "d", "root": "", "files": [], "verified": True},
        seed=1111,
        timings={},
        versions={},
        date="today",
        confidence=confidence,
    )


def _training(seed, lr=3e-5):
    return {
        "training": {
            "method": "simcse",
            "base_model": "m",
            "base_weights_sha256": "w",
            "data": {"f": 1},
            "dev_task": "STSBenchmark-dev",
            "hyperparameters": {"seed": seed, "lr": lr},
        }
    }


def _table(text, title):
    block = text.split(f"## {title}")[1].split("\n\n")[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


def _store_all(store, encoder, scores, **kw):
    for column, score in zip(STS.columns, scores):
        store.save(_result(encoder, column.task, score, **kw))


def test_groups_sorting_and_seed_aggregation(tmp_path):
    store = ResultStore(tmp_path)
    _store_all(store, "base-low", [50.0] * 7)
    _store_all(store, "base-high", [60.0] * 7)
    _store_all(store, "base-high+whitening", [70.0] * 7)
    _store_all(store, "local", [55.0] * 7, identity={"model": "/somewhere/runs/x/model"})
    _store_all(store, "run-s1", [64.0] * 7, metadata=_training(1))
    _store_all(store, "run-s2", [66.0] * 7, metadata=_training(2))
    _store_all(store, "run-other-lr", [64.5] * 7, metadata=_training(3, lr=1e-5))
    board = render(store, tmp_path / "none")
    rows = _table(board, STS.title)
    assert [(r[0], r[1].split(";")[0]) for r in rows] == [
        ("base-high", "base"),
        ("base-low", "base"),
        ("base-high+whitening", "post-processed"),
        ("run-s1 (seeds 1,2)", "trained"),
        ("run-other-lr", "trained"),
        ("local", "trained"),
    ]
    # a trained row says how to rebuild it, or that it cannot (these synthetic runs record no recipe)
    assert rows[4][1] == rows[5][1] == "trained; no recipe"
    assert rows[3][1] == "trained; no recipe; other seeds: run-s2"
    # mean and sample standard deviation of 64 and 66: 65 and sqrt(2)
    assert rows[3][2:9] == ["65.00 ±1.41"] * 7 and rows[3][9] == "65.00"
    assert rows[0][9] == "60.00"


def test_marks_follow_a_paired_test_on_items_and_intervals_are_listed(tmp_path):
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)
    cosines = {
        "best": gold + rng.normal(0, 1.0, 400),
        "close": gold + rng.normal(0, 1.05, 400),
        "far": gold + rng.normal(0, 4.0, 400),
    }
    scores = {k: 100 * float(spearmanr(v, gold)[0]) for k, v in cosines.items()}
    top = max(scores, key=scores.get)
    expected = {k: steiger_spearman(cosines[top], v, gold).p_value >= 0.05 for k, v in cosines.items() if k != top}
    assert sorted(expected.values()) == [False, True]  # the premise: one tie with the best, one clearly worse
    store = ResultStore(tmp_path)
    for name, cos in cosines.items():
        score = 100 * float(spearmanr(cos, gold)[0])
        conf = {"main": [score - 2, score + 1.5]}
        _store_all(store, name, [50.0] * 5 + [score, 50.0], confidence=conf)  # STS-B is the 6th column
        items = {"cosine": cos, "gold": gold, "subset": np.zeros(400, np.int16), "subset_names": np.array(["test"])}
        store.save(
            replace(_result(name, "STSBenchmark", score, confidence=conf), per_item=Evaluation({}, items, "sts"))
        )
    board = render(store, tmp_path / "none")
    rows = {r[0]: r for r in _table(board, STS.title)}
    assert {k: rows[k][7].endswith("†") for k in expected} == expected
    assert not rows[top][7].endswith("†") and not any(r[2].endswith("†") for r in rows.values())  # no items: no mark
    ci_block = board.split("95% confidence intervals")[1].split("\n\n")[1]
    ci_rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in ci_block.splitlines()[2:])}
    best = 100 * float(spearmanr(cosines["best"], gold)[0])
    assert ci_rows["best"][6] == f"{best - 2:.1f}–{best + 1.5:.1f}"
    # Avg.: seven intervals of half-width 1.75 around the mean: 1.75 * sqrt(7) / 7
    avg, half = (6 * 50.0 + best) / 7, 1.75 / 7**0.5
    assert ci_rows["best"][8] == f"{avg - half:.1f}–{avg + half:.1f}"


def test_a_seed_aggregate_is_named_after_its_recipe_name_not_a_derived_key(tmp_path):
    store = ResultStore(tmp_path)
    _store_all(store, "recipe:0123456789ab", [64.0] * 7, metadata=_training(1))
    _store_all(store, "simcse", [66.0] * 7, metadata=_training(42))
    rows = _table(render(store, tmp_path / "none"), STS.title)
    assert rows[0][0] == "simcse (seeds 1,42)" and rows[0][1].endswith("other seeds: recipe:0123456789ab")


# ---- formats and filters ------------------------------------------------------------------------------
def _two_encoders(tmp_path):
    store = ResultStore(tmp_path / "results")
    conf = {"main": [58.0, 62.0]}
    _store_all(store, "under_score", [60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0], confidence=conf)
    _store_all(store, "plain", [70.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0], confidence=conf)
    return store


def test_csv_is_long_with_one_line_per_row_and_column_that_pandas_reads(tmp_path):
    import io

    import pandas as pd

    from benchharness.reporting.leaderboard import build
    from benchharness.reporting.table_formats import to_csv

    frame = pd.read_csv(io.StringIO(to_csv(build(_two_encoders(tmp_path), None))))
    sts = frame[frame.section == STS.title]
    assert len(sts) == 2 * 8  # 7 columns and Avg. for each of two rows
    row = sts[(sts.encoder == "plain") & (sts.column == "STS12")].iloc[0]
    assert row.score == 70.0 and row.best_in_column == 1 and (row.ci_low, row.ci_high) == (58.0, 62.0)
    avg = sts[(sts.encoder == "under_score") & (sts.column == "Avg.")].iloc[0]
    assert avg.score == pytest.approx(63.0) and avg.best_in_column == 1  # 441/7 against 391/7


def test_latex_is_booktabs_with_the_best_in_bold_and_compiles(tmp_path):
    import shutil
    import subprocess

    from benchharness.reporting.leaderboard import build
    from benchharness.reporting.table_formats import latex

    text = latex(build(_two_encoders(tmp_path), None), intervals=True)
    assert r"\toprule" in text and r"\midrule" in text and r"\bottomrule" in text
    assert r"under\_score & 60.00 & \textbf{61.00}" in text  # escaped name; best of STS13 in bold
    assert r"plain & \textbf{70.00}" in text and "58.0--62.0" in text  # the interval table
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended)")
    doc = tmp_path / "doc.tex"
    (tmp_path / "board.tex").write_text(text)
    doc.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage[utf8]{inputenc}\n"
        "\\begin{document}\n\\input{board.tex}\n\\end{document}\n"
    )
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000


def test_filters_keep_the_named_encoders_tasks_and_groups(tmp_path):
    from benchharness.reporting.leaderboard import build

    store = _two_encoders(tmp_path)
    _store_all(store, "plain+whitening", [71.0] * 7)
    board = build(store, None, encoders=["plain*"], tasks={"STS12", "STSBenchmark"})
    (table,) = board.tables
    assert table.headers == ["STS12", "STS-B"]  # no Avg. over a partial suite
    assert [line.encoder for line in table.lines] == ["plain", "plain+whitening"]
    board = build(store, None, groups={"post-processed"})
    assert [line.encoder for line in board.tables[0].lines] == ["plain+whitening"]
    with pytest.raises(ValueError, match="unknown row group"):
        build(store, None, groups={"tuned"})


def test_published_rows_are_a_group_that_can_be_left_out(tmp_path):
    from benchharness.reporting.leaderboard import build

    published = tmp_path / "published"
    published.mkdir()
    (published / "sts.csv").write_text(
        "paper,table,model,STS12,STS13,STS14,STS15,STS16,STSB,SICKR,Avg\n"
        "simcse,5,SimCSE-BERTbase,68.40,82.41,74.38,80.91,78.56,76.85,72.23,76.25\n"
    )
    store = _two_encoders(tmp_path)
    lines = build(store, published).tables[0].lines
    assert [line.group for line in lines] == ["base", "base", "published"]
    assert lines[-1].cells[1].best  # 82.41 is the best STS13 of all rows shown
    assert all(line.group != "published" for line in build(store, published, groups={"base"}).tables[0].lines)


def test_the_header_names_the_results_folder_read(tmp_path, monkeypatch, capsys):
    from benchharness.cli import main

    _two_encoders(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", "--results-dir", "elsewhere/results", "--no-published"]) == 0
    assert "from the result files under `elsewhere/results/`" in capsys.readouterr().out
    assert main(["leaderboard", "--results-dir", "elsewhere/results", "-o", "board.tex"]) == 0
    assert (tmp_path / "board.tex").read_text().startswith("% benchharness leaderboard from elsewhere/results/")
