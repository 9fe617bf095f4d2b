"""NanoBEIR's mean where results are shown: ``Results.mean`` and the results' table (what ``run``
prints), and the leaderboard's Avg., each with the interval resampled within each task, redone here
by hand from the stored per-query items."""

from __future__ import annotations

import numpy as np
import pytest

import benchharness
from benchharness import tasks
from benchharness.core.errors import InvalidInputError
from benchharness.core.results import ResultStore
from benchharness.reporting import leaderboard
from benchharness.scoring.stats.bootstrap import derive_seed
from tests.fakes import HashEncoder
from tests.nanobeir_helpers import write_data_root

SEED = 1234


def by_hand(per_query: dict[str, np.ndarray], resamples: int = 1000) -> tuple[float, float]:
    """The 95% percentile interval of the mean over tasks of each task's mean nDCG@10 x100, each
    task's queries resampled within it from the generator its own interval uses."""
    means = np.zeros(resamples)
    for task, values in per_query.items():
        draw = np.random.default_rng(derive_seed(SEED, task))
        means += [100 * values[draw.integers(0, len(values), len(values))].mean() for _ in range(resamples)]
    low, high = np.quantile(means / len(per_query), [0.025, 0.975])
    return float(low), float(high)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Two encoders' NanoBEIR results in a results folder, with their items."""
    folder = tmp_path_factory.mktemp("group-means")
    root = write_data_root(folder / "data")
    for salt in ("a", "b"):
        benchharness.evaluate(HashEncoder(f"hash-{salt}", salt=salt), "nanobeir", data_dir=root, seed=SEED,
                              results_dir=folder / "results")  # fmt: skip
    return benchharness.load_results(folder / "results")


def test_the_mean_of_the_results_and_its_interval_are_those_redone_by_hand(stored):
    names = tasks.resolve("nanobeir")
    mean = stored.mean("nanobeir", encoder="hash-a")
    items = {n: stored.items(stored.get("hash-a", n)).items["ndcg@10"] for n in names}
    assert mean.tasks == tuple(names) and mean.scores == tuple(stored.get("hash-a", n).main_score for n in names)
    assert mean.mean == pytest.approx(np.mean([100 * v.mean() for v in items.values()]), abs=1e-9)
    assert mean.interval == pytest.approx(by_hand(items), abs=1e-9)
    assert stored.mean(names[:2], encoder="hash-a").mean == pytest.approx(np.mean(mean.scores[:2]), abs=1e-12)
    with pytest.raises(InvalidInputError, match="say which with encoder="):
        stored.mean("nanobeir")
    row = next(line for line in str(stored).splitlines() if "hash-b" in line and "(mean of 13)" in line)
    b = stored.mean("nanobeir", encoder="hash-b")
    assert f"{b.mean:.2f}" in row and f"95% CI {b.low:.2f}-{b.high:.2f} (queries, resampled within each task)" in row


def test_a_mean_lacking_a_task_is_refused_and_one_lacking_items_says_why(stored):
    some = benchharness.Results([r for r in stored if r.task != "NanoNQ"], store=stored.store)
    with pytest.raises(InvalidInputError, match="no result of hash-a on NanoNQ: the mean of nanobeir needs all 13"):
        some.mean("nanobeir", encoder="hash-a")
    assert "(mean of 13)" not in some.table()
    bare = benchharness.Results([r for r in stored if r.encoder == "hash-a"])  # no folder: no items
    assert bare.mean("nanobeir").interval is None
    assert "no interval: the result of hash-a on NanoClimateFEVER carries no per-item outputs" in bare.table()


def test_the_leaderboards_avg_is_the_mean_with_the_interval_resampled_within_each_task(stored):
    board = leaderboard.build(stored.store, None, tasks=set(tasks.resolve("nanobeir")))
    [table] = board.tables
    assert table.headers[-1] == "Avg." and table.headers[:2] == ["ClimateFEVER", "DBPedia"]
    for line in table.lines:
        avg = line.cells[-1]
        mean = stored.mean("nanobeir", encoder=line.encoder)
        assert avg.value == pytest.approx(mean.mean, abs=1e-9)
        items = {n: stored.items(stored.get(line.encoder, n)).items["ndcg@10"] for n in mean.tasks}
        assert avg.interval == pytest.approx(by_hand(items), abs=1e-9)
        normal = sum(((hi - lo) / 2) ** 2 for lo, hi in (c.interval for c in line.cells[:-1])) ** 0.5 / 13
        assert abs((avg.interval[1] - avg.interval[0]) / 2 - normal) > 1e-3  # not the normal approximation
    partial = leaderboard.build(stored.store, None, tasks={"NanoNQ", "NanoFEVER"})
    assert partial.tables[0].headers == ["FEVER", "NQ"]  # no Avg. over part of the group


def test_results_stored_without_items_fall_back_to_the_normal_approximation(stored, tmp_path):
    store = ResultStore(tmp_path / "results")
    for result in stored:
        store.save(result)  # the records alone, no items file
    [table] = leaderboard.build(store, None, tasks=set(tasks.resolve("nanobeir"))).tables
    line = table.lines[0]
    half = sum(((hi - lo) / 2) ** 2 for lo, hi in (c.interval for c in line.cells[:-1])) ** 0.5 / 13
    assert line.cells[-1].interval == pytest.approx((line.cells[-1].value - half, line.cells[-1].value + half))
