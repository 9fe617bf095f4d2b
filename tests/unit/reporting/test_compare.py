"""``compare`` reads stored items and reports what the statistics library computes on them."""

from dataclasses import asdict

import numpy as np
import pytest
from scipy.stats import spearmanr

from benchharness import tasks
from benchharness.cli import main
from benchharness.core.data_root import DataRoot
from benchharness.core.items import MissingItemsError
from benchharness.core.results import ResultStore
from benchharness.core.task import Evaluation
from benchharness.evaluation.run_settings import RunSettings
from benchharness.evaluation.runner import run
from benchharness.reporting.compare import compare_stored
from benchharness.scoring.confidence import paired
from benchharness.scoring.stats import (
    average_paired,
    derive_seed,
    holm,
    mcnemar,
    paired_accuracy,
    paired_spearman,
    steiger_spearman,
)
from tests.fakes import HashEncoder

TASKS = ["STS12", "STSBenchmark"]


@pytest.fixture
def two_encoders(data_dir, tmp_path):
    store = ResultStore(tmp_path)
    encoders = {"a": HashEncoder("a", dim=16), "b": HashEncoder("b", dim=16, salt="b")}
    run(list(encoders), [tasks.get(n) for n in TASKS], encoders.__getitem__, DataRoot(data_dir), store, RunSettings())
    return store


def test_compare_rows_are_the_stats_library_on_the_stored_items(two_encoders):
    store = two_encoders
    rows = compare_stored(store, "a", "b", TASKS, n_resamples=200, seed=7)
    assert [r.task for r in rows] == [*TASKS, "Avg. (STS, 2 tasks)"]
    reps = []
    for row, task in zip(rows, TASKS):
        a, b = store.load_items(store.load("a", task)).items, store.load_items(store.load("b", task)).items
        assert row.score_a == pytest.approx(100 * spearmanr(a["cosine"], a["gold"])[0], abs=1e-9)
        rep = paired_spearman(a["cosine"], b["cosine"], a["gold"], n_resamples=200, seed=derive_seed(7, task))
        reps.append(rep)
        c = rep.comparison()
        assert (row.difference, row.low, row.high, row.p_value) == (c.difference, c.low, c.high, c.p_value)
        assert row.crosscheck["steiger"] == asdict(steiger_spearman(a["cosine"], b["cosine"], a["gold"]))
        assert row.difference == pytest.approx(row.score_a - row.score_b, abs=1e-9)
    assert [r.p_holm for r in rows[:2]] == holm([r.p_value for r in rows[:2]])
    avg = average_paired(reps).comparison()
    assert (rows[2].difference, rows[2].low, rows[2].high) == (avg.difference, avg.low, avg.high)
    assert rows[2].score_a == pytest.approx((rows[0].score_a + rows[1].score_a) / 2)


def test_transfer_pairing_is_paired_accuracy_with_mcnemar():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 300)
    pred_a = np.where(rng.random(300) < 0.8, gold, 1 - gold)
    pred_b = np.where(rng.random(300) < 0.7, gold, 1 - gold)
    a = Evaluation({}, {"pred": pred_a, "gold": gold}, "classification")
    b = Evaluation({}, {"pred": pred_b, "gold": gold}, "classification")
    rep, cross = paired("SST2", "acc", a, b, n_resamples=300, seed=3)
    expected = paired_accuracy(pred_a, pred_b, gold, n_resamples=300, seed=derive_seed(3, "SST2"))
    assert rep.comparison() == expected.comparison()
    assert rep.difference == pytest.approx(100 * ((pred_a == gold).mean() - (pred_b == gold).mean()))
    assert cross["mcnemar"] == asdict(mcnemar(pred_a, pred_b, gold))
    with pytest.raises(ValueError, match="different items"):
        paired("SST2", "acc", a, Evaluation({}, {"pred": pred_b[:10], "gold": gold[:10]}, "classification"))


def test_cli_compare_prints_the_table_and_names_the_command_for_missing_items(two_encoders, capsys):
    store = two_encoders
    assert (
        main(["compare", "a", "b", "--tasks", ",".join(TASKS), "--results-dir", str(store.root), "--resamples", "100"])
        == 0
    )
    out = capsys.readouterr().out
    assert "| STS12" in out and "Steiger" in out and "Avg. (STS, 2 tasks)" in out and "Holm" in out
    store.path("b", "STS12").with_name("STS12.items.npz").unlink()
    with pytest.raises(MissingItemsError, match="benchharness run --encoders 'b' --tasks STS12 --add-items"):
        compare_stored(store, "a", "b", ["STS12"])
    assert main(["compare", "a", "b", "--tasks", "STS12", "--results-dir", str(store.root)]) == 2
    assert "--add-items" in capsys.readouterr().err
