"""Leaderboard grouping, sorting, seed aggregation, marks and intervals on synthetic result files."""

import numpy as np
from scipy.stats import spearmanr

from benchharness.core.results import Result, ResultStore
from benchharness.core.task import Evaluation
from benchharness.reporting.leaderboard import SECTIONS
from benchharness.reporting.table_formats import markdown_leaderboard as render
from benchharness.scoring.stats import steiger_spearman

STS = SECTIONS[0]


def _result(encoder, task, score, metadata=None, identity=None, confidence=None):
    return Result(encoder=encoder, task=task, main_score=score, main_metric="spearman", metrics={"spearman": score},
                  protocol={"variant": "v"}, encoder_identity={"hash": encoder, **(identity or {})},
                  encoder_metadata=metadata or {}, data={"sha256": "d", "root": "", "files": [], "verified": True},
                  seed=1111, timings={}, versions={}, date="today", confidence=confidence)


def _training(seed, lr=3e-5):
    return {"training": {"method": "simcse", "base_model": "m", "base_weights_sha256": "w", "data": {"f": 1},
                         "dev_task": "STSBenchmark-dev", "hyperparameters": {"seed": seed, "lr": lr}}}


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
        ("base-high", "base"), ("base-low", "base"), ("base-high+whitening", "post-processed"),
        ("run-s1 (seeds 1,2)", "trained"), ("run-other-lr", "trained"), ("local", "trained")]
    # a trained row says how to rebuild it, or that it cannot (these synthetic runs record no recipe)
    assert rows[4][1] == rows[5][1] == "trained; no recipe"
    assert rows[3][1] == "trained; no recipe; other seeds: run-s2"
    # mean and sample standard deviation of 64 and 66: 65 and sqrt(2)
    assert rows[3][2:9] == ["65.00 ±1.41"] * 7 and rows[3][9] == "65.00"
    assert rows[0][9] == "60.00"


def test_marks_follow_a_paired_test_on_items_and_intervals_are_listed(tmp_path):
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)
    cosines = {"best": gold + rng.normal(0, 1.0, 400), "close": gold + rng.normal(0, 1.05, 400),
               "far": gold + rng.normal(0, 4.0, 400)}
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
        store.save(_result(name, "STSBenchmark", score, confidence=conf), Evaluation({}, items, "sts"))
    board = render(store, tmp_path / "none")
    rows = {r[0]: r for r in _table(board, STS.title)}
    assert {k: rows[k][7].endswith("†") for k in expected} == expected
    assert not rows[top][7].endswith("†") and not any(r[2].endswith("†") for r in rows.values())  # no items: no mark
    ci_block = board.split("95% confidence intervals")[1].split("\n\n")[1]
    ci_rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in ci_block.splitlines()[2:])}
    best = 100 * float(spearmanr(cosines["best"], gold)[0])
    assert ci_rows["best"][6] == f"{best - 2:.1f}–{best + 1.5:.1f}"
    # Avg.: seven intervals of half-width 1.75 around the mean: 1.75 * sqrt(7) / 7
    avg, half = (6 * 50.0 + best) / 7, 1.75 / 7 ** 0.5
    assert ci_rows["best"][8] == f"{avg - half:.1f}–{avg + half:.1f}"


def test_a_seed_aggregate_is_named_after_its_recipe_name_not_a_derived_key(tmp_path):
    store = ResultStore(tmp_path)
    _store_all(store, "recipe:0123456789ab", [64.0] * 7, metadata=_training(1))
    _store_all(store, "simcse", [66.0] * 7, metadata=_training(42))
    rows = _table(render(store, tmp_path / "none"), STS.title)
    assert rows[0][0] == "simcse (seeds 1,42)" and rows[0][1].endswith("other seeds: recipe:0123456789ab")
