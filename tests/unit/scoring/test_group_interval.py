"""A group's mean over tasks with its interval (``scoring.confidence.mean_over_tasks``): the stratified
bootstrap redone by hand in NumPy with the same seeds, and its width and coverage checked against what
the sampling theory of a mean of independent means says."""

from __future__ import annotations

import numpy as np
import pytest

from benchharness.core.errors import InvalidInputError
from benchharness.core.task import Evaluation
from benchharness.scoring.confidence import mean_over_tasks
from benchharness.scoring.stats.bootstrap import derive_seed, percentile_interval


def ranking(ndcg: np.ndarray) -> Evaluation:
    """A retrieval task's per-query items (``tasks.files.ranking``), its metric the mean x100."""
    return Evaluation({"ndcg@10": 100 * float(ndcg.mean())}, {"ndcg@10": ndcg, "map@100": ndcg / 2}, "ranking")


def test_each_task_is_resampled_within_itself_with_its_own_seed_and_the_means_averaged():
    rng = np.random.default_rng(3)
    tasks = {name: rng.random(n) for name, n in (("NanoA", 50), ("NanoB", 37), ("NanoC", 12))}
    seeds = {name: derive_seed(2024, name) for name in tasks}
    reps = mean_over_tasks([(ranking(v), "ndcg@10", seeds[name]) for name, v in tasks.items()], n_resamples=400)

    by_hand = np.zeros(400)
    for name, values in tasks.items():
        draw = np.random.default_rng(seeds[name])
        # resample i of a task: its queries drawn with replacement, as many as it has
        by_hand += np.array([100 * values[draw.integers(0, len(values), len(values))].mean() for _ in range(400)])
    by_hand /= len(tasks)
    assert np.allclose(reps.values, by_hand, rtol=0, atol=1e-9)
    assert reps.estimate == pytest.approx(np.mean([100 * v.mean() for v in tasks.values()]), abs=1e-12)
    assert reps.unit == "queries, resampled within each task" and reps.n == 99


def test_the_width_is_the_standard_error_of_a_mean_of_independent_means():
    """The half-width of the 95% interval is about 1.96 standard errors, where the standard error of
    the unweighted mean of T task means is sqrt(sum_t var_t / n_t) / T (the bootstrap's variance
    uses the plug-in variance, ddof 0)."""
    rng = np.random.default_rng(11)
    tasks = [rng.beta(0.7, 0.9, n) for n in (50, 50, 40, 60, 25)]
    reps = mean_over_tasks([(ranking(v), "ndcg@10", i) for i, v in enumerate(tasks)], n_resamples=4000)
    se = 100 * np.sqrt(sum(v.var() / len(v) for v in tasks)) / len(tasks)
    low, high = percentile_interval(reps.values)
    assert (high - low) / 2 == pytest.approx(1.96 * se, rel=0.06)
    assert reps.values.std() == pytest.approx(se, rel=0.05)


def test_the_interval_covers_the_true_mean_about_95_times_in_100():
    """Simulated groups of five tasks whose per-query scores have known means: the intervals cover
    the true mean of the means at the nominal rate (300 groups: 95% +- 3 standard errors of 1.3%,
    percentile intervals of a mean of 240 queries running a little short)."""
    truth = np.array([0.3, 0.45, 0.5, 0.62, 0.8])
    rng = np.random.default_rng(5)
    covered = 0
    for trial in range(300):
        tasks = [rng.binomial(1, p, 48).astype(float) for p in truth]
        reps = mean_over_tasks([(ranking(v), "ndcg@10", trial * 10 + i) for i, v in enumerate(tasks)], 500)
        low, high = percentile_interval(reps.values)
        covered += low <= 100 * truth.mean() <= high
    assert 0.90 <= covered / 300 <= 0.99


def test_a_metric_the_items_do_not_resample_is_refused_in_one_line():
    with pytest.raises(InvalidInputError, match="no resamples of 'recall@100' from ranking items"):
        mean_over_tasks([(ranking(np.ones(5) / 2), "recall@100", 0)])
    with pytest.raises(InvalidInputError, match="at least one task"):
        mean_over_tasks([])
