"""Confidence intervals and paired comparisons of stored results, from their per-item outputs.

The link between the statistics library (``benchharness.scoring.stats``, pure functions of arrays) and the
tasks' per-item outputs (``benchharness.core.task.Evaluation``): it knows, for each kind of outputs and
each metric, what the score averages over and therefore what to resample.

- STS: pairs. ``all.spearman`` (STS12-16's main score) and a single split's ``spearman`` resample
  pairs of the concatenation; ``mean.spearman``/``wmean.spearman`` resample within each subset
  (stratified), as those scores aggregate per-subset correlations. A task whose main score is
  ``pearson`` (SentEval's supervised relatedness, whose ``cosine`` array holds the regressor's
  predicted scores) gets Pearson's r resampled over pairs as well, and Pearson's paired tests.
- Transfer: test items for fixed test sets (SST2, TREC, MRPC: accuracy, and F1 for MRPC); outer
  folds for the k-fold tasks (MR, CR, SUBJ, MPQA), whose score is the mean of the per-fold
  accuracies. Which one is recorded in ``unit``.
- Ranking: queries, through the per-query AP/RR.
- A group's mean over tasks declared a score of its own (NanoBEIR's): each task's items resampled
  within the task, the tasks' scores averaged per resample (``mean_over_tasks``).

Intervals are 95% percentile-bootstrap intervals with ``RESAMPLES`` resamples, seeded from the run
seed and the task name (``derive_seed``) so that a rerun gives the same interval and tasks are
resampled independently (which the Avg. interval relies on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError
from benchharness.core.task import Evaluation
from benchharness.scoring.metrics import pearson
from benchharness.scoring.stats import (
    PairedReplicates,
    Replicates,
    bootstrap_f1,
    bootstrap_fold_mean,
    bootstrap_mean,
    bootstrap_spearman,
    mcnemar,
    paired_accuracy,
    paired_mean,
    paired_spearman,
    steiger_spearman,
    weighted_average,
)
from benchharness.scoring.stats.bootstrap import DEFAULT_LEVEL, as_columns, derive_seed, resample_statistic
from benchharness.scoring.stats.paired import _swap_null, weighted_average_paired
from benchharness.scoring.stats.significance import SteigerResult, steiger_z
from benchharness.scoring.stats.vectorised import pearson_rows

RESAMPLES = 1000
METHOD = "percentile bootstrap"


def _sts_parts(items: dict[str, np.ndarray], n_resamples: int, seed: int) -> tuple[list[Replicates], list[int]]:
    names = [str(x) for x in items["subset_names"]]
    parts, sizes = [], []
    for i, name in enumerate(names):
        rows = items["subset"] == i
        parts.append(
            bootstrap_spearman(
                items["cosine"][rows], items["gold"][rows], n_resamples=n_resamples, seed=derive_seed(seed, name)
            )
        )
        sizes.append(int(rows.sum()))
    return parts, sizes


def fold_accuracies(items: dict[str, np.ndarray]) -> np.ndarray:
    """Per outer fold, the test accuracy x100 rounded to 2 decimals, as SentEval (and the task's
    ``fold_acc``) computes it; their mean is the k-fold task's score."""
    folds = items["fold"]
    right = items["pred"] == items["gold"]
    return np.array([round(100 * float(right[folds == f].mean()), 2) for f in range(int(folds.max()) + 1)])


def bootstrap_pearson(pred: np.ndarray, gold: np.ndarray, n_resamples: int = RESAMPLES, seed: int = 0) -> Replicates:
    """Pearson x100 between predicted and gold scores, resampling pairs."""
    pred, gold = (x.astype(np.float64) for x in as_columns(pred, gold, names=("pred", "gold")))
    rng = np.random.default_rng(seed)
    values = resample_statistic(lambda p, g: 100.0 * pearson_rows(p, g), (pred, gold), n_resamples, rng)
    return Replicates(estimate=100.0 * pearson(pred, gold), values=values, unit="pairs", n=len(pred), seed=seed)


def paired_pearson(
    pred_a: np.ndarray, pred_b: np.ndarray, gold: np.ndarray, n_resamples: int = RESAMPLES, seed: int = 0
) -> PairedReplicates:
    """Pearson(A, gold) - Pearson(B, gold), x100, over the same pairs. The permutation null swaps
    each system's standardised predictions (Pearson is blind to each side's location and scale, as
    Spearman is to anything but ranks, so only the agreement with the gold is tested)."""
    a, b, g = (x.astype(np.float64) for x in as_columns(pred_a, pred_b, gold, names=("pred_a", "pred_b", "gold")))
    rng = np.random.default_rng(seed)
    boot = resample_statistic(
        lambda x, y, z: 100.0 * (pearson_rows(x, z) - pearson_rows(y, z)), (a, b, g), n_resamples, rng
    )
    za, zb = ((x - x.mean()) / x.std() for x in (a, b))
    null = _swap_null(lambda x, y: 100.0 * (pearson_rows(x, g) - pearson_rows(y, g)), za, zb, n_resamples, rng)
    observed = 100.0 * (pearson(a, g) - pearson(b, g))
    return PairedReplicates(difference=observed, bootstrap=boot, null=null, unit="pairs", n=len(g), seed=seed)


def steiger_pearson(pred_a: np.ndarray, pred_b: np.ndarray, gold: np.ndarray) -> SteigerResult:
    """Steiger's Z on the Pearson correlations of two systems' predictions with a shared gold."""
    return steiger_z(pearson(gold, pred_a), pearson(gold, pred_b), pearson(pred_a, pred_b), len(gold))


def replicates(
    evaluation: Evaluation, n_resamples: int = RESAMPLES, seed: int = 0, main_metric: str | None = None
) -> dict[str, Replicates]:
    """Bootstrap replicates of every metric the items determine, by metric name (Pearson's r only
    where it is the main score: no stored result of the cosine tasks changes)."""
    items, kind = evaluation.items, evaluation.kind
    if kind == "sts":
        if len(items["subset_names"]) == 1:
            out = {"spearman": bootstrap_spearman(items["cosine"], items["gold"], n_resamples=n_resamples, seed=seed)}
            if main_metric == "pearson":
                out["pearson"] = bootstrap_pearson(items["cosine"], items["gold"], n_resamples, seed)
            return out
        out = {"all.spearman": bootstrap_spearman(items["cosine"], items["gold"], n_resamples=n_resamples, seed=seed)}
        parts, sizes = _sts_parts(items, n_resamples, seed)
        for key, weights in (("mean", None), ("wmean", sizes)):
            avg = weighted_average(parts, weights, unit="pairs, resampled within each subset")
            out[f"{key}.spearman"] = Replicates(avg.estimate, avg.values, avg.unit, avg.n, seed)
        return out
    if kind == "classification":
        if "fold" in items:
            return {"acc": bootstrap_fold_mean(fold_accuracies(items), n_resamples=n_resamples, seed=seed)}
        right = items["pred"] == items["gold"]
        out = {"acc": bootstrap_mean(right, unit="test items", n_resamples=n_resamples, seed=seed)}
        if "f1" in evaluation.metrics:  # MRPC reports F1 beside accuracy
            out["f1"] = bootstrap_f1(items["pred"], items["gold"], n_resamples=n_resamples, seed=seed)
        return out
    if kind == "ranking":
        return {
            key: bootstrap_mean(values, unit="queries", n_resamples=n_resamples, seed=seed)
            for key, values in items.items()
        }
    raise InvalidInputError(f"unknown kind of per-item outputs {kind!r}")


def mean_over_tasks(parts: Sequence[tuple[Evaluation, str, int]], n_resamples: int = RESAMPLES) -> Replicates:
    """The unweighted mean of several tasks' scores, with its resamples: a bootstrap stratified by
    task. Each part is a task's items, the metric averaged and the task's seed; each task's items are
    resampled within the task (queries for retrieval), with the seed its own interval is drawn with
    (``derive_seed(run seed, task)``), and the tasks' metrics are averaged resample by resample. The
    tasks are independent samples, so the spread of those averages is the mean's: NanoBEIR's mean
    nDCG@10 over its datasets, as sentence-transformers' ``NanoBEIREvaluator`` aggregates them."""
    if not parts:
        raise InvalidInputError("a mean over tasks needs at least one task")
    per_task = []
    for evaluation, metric, seed in parts:
        reps = replicates(evaluation, n_resamples, seed, main_metric=metric)
        if metric not in reps:
            raise InvalidInputError(
                f"no resamples of {metric!r} from {evaluation.kind} items (resamples of: {', '.join(reps)})"
            )
        per_task.append(reps[metric])
    units = sorted({rep.unit for rep in per_task})
    return weighted_average(per_task, unit=f"{', '.join(units)}, resampled within each task")


def confidence_record(
    evaluation: Evaluation,
    main_metric: str,
    task: str,
    run_seed: int,
    n_resamples: int = RESAMPLES,
    previous: tuple[dict[str, Any], Evaluation] | None = None,
) -> dict[str, Any]:
    """What a result stores under ``confidence``: the main score's interval, then every metric's.

    ``previous`` is the record and items of a result being recomputed, computed by the same code and
    libraries (the runner checks that): when its seed, resamples and method are this call's and its
    items equal ``evaluation``'s array for array, its record is what the bootstrap would return, so
    it is returned without resampling again. That is most of a warm rerun's time (0.7 s of an STS
    suite's ~1.7 s), spent recomputing what the stored result already holds.
    """
    seed = derive_seed(run_seed, task)
    if previous is not None and _same_inputs(previous, evaluation, main_metric, seed, n_resamples):
        return previous[0]
    reps = replicates(evaluation, n_resamples, seed, main_metric=main_metric)
    if main_metric not in reps:
        raise InvalidInputError(
            f"{task}: no interval for the main score {main_metric!r} from {evaluation.kind} items "
            f"(intervals for: {', '.join(reps)})"
        )
    intervals = {}
    for key, rep in reps.items():
        iv = rep.interval(DEFAULT_LEVEL)
        intervals[key] = {"low": round(iv.low, 4), "high": round(iv.high, 4), "unit": iv.unit}
    main = intervals[main_metric]
    return {
        "main": [main["low"], main["high"]],
        "unit": main["unit"],
        "level": DEFAULT_LEVEL,
        "method": METHOD,
        "resamples": n_resamples,
        "seed": seed,
        "intervals": intervals,
    }


def _same_inputs(
    previous: tuple[dict[str, Any], Evaluation], evaluation: Evaluation, main_metric: str, seed: int, n_resamples: int
) -> bool:
    """Whether ``previous``'s record was bootstrapped from exactly these items with these settings."""
    record, items = previous
    if (
        record.get("seed") != seed
        or record.get("resamples") != n_resamples
        or record.get("method") != METHOD
        or record.get("level") != DEFAULT_LEVEL
        or main_metric not in record.get("intervals", {})
        or items.kind != evaluation.kind
        or items.items.keys() != evaluation.items.keys()
    ):
        return False
    return all(
        items.items[k].dtype == v.dtype and np.array_equal(items.items[k], v) for k, v in evaluation.items.items()
    )


def check_same_items(task: str, a: Evaluation, b: Evaluation) -> None:
    """Paired tests need the same items in the same order: same kind, length and gold."""
    if a.kind != b.kind:
        raise InvalidInputError(f"{task}: items of kind {a.kind!r} and {b.kind!r} cannot be paired")
    gold_a, gold_b = a.items.get("gold"), b.items.get("gold")
    lengths = {k: len(v) for k, v in a.items.items()}, {k: len(v) for k, v in b.items.items()}
    if lengths[0] != lengths[1] or (gold_a is not None and (gold_b is None or not np.array_equal(gold_a, gold_b))):
        raise InvalidInputError(
            f"{task}: the two results were scored on different items (lengths {lengths[0]} vs "
            f"{lengths[1]}); were they run on the same data?"
        )


def paired(
    task: str, main_metric: str, a: Evaluation, b: Evaluation, n_resamples: int = RESAMPLES, seed: int = 0
) -> tuple[PairedReplicates, dict[str, Any]]:
    """A - B on the task's main score over the same items, and the closed-form cross-check:
    Steiger's Z for STS, McNemar on the test predictions for transfer (none for ranking)."""
    check_same_items(task, a, b)
    seed = derive_seed(seed, task)
    ia, ib = a.items, b.items
    if a.kind == "sts" and main_metric == "pearson":
        rep = paired_pearson(ia["cosine"], ib["cosine"], ia["gold"], n_resamples, seed)
        return rep, {"steiger": asdict(steiger_pearson(ia["cosine"], ib["cosine"], ia["gold"]))}
    if a.kind == "sts":
        if main_metric in ("all.spearman", "spearman"):
            rep = paired_spearman(ia["cosine"], ib["cosine"], ia["gold"], n_resamples=n_resamples, seed=seed)
        elif main_metric in ("mean.spearman", "wmean.spearman"):
            names = [str(x) for x in ia["subset_names"]]
            parts = [
                paired_spearman(
                    ia["cosine"][ia["subset"] == i],
                    ib["cosine"][ib["subset"] == i],
                    ia["gold"][ia["subset"] == i],
                    n_resamples=n_resamples,
                    seed=derive_seed(seed, name),
                )
                for i, name in enumerate(names)
            ]
            weights = [p.n for p in parts] if main_metric.startswith("wmean") else None
            rep = weighted_average_paired(parts, weights, unit="pairs, resampled within each subset")
        else:
            raise InvalidInputError(f"{task}: no paired comparison for STS metric {main_metric!r}")
        if np.array_equal(np.argsort(ia["cosine"], kind="stable"), np.argsort(ib["cosine"], kind="stable")):
            # A and B rank every pair alike: the difference is 0 in every resample, and Steiger's test,
            # which needs their correlation below 1, has nothing to test
            return rep, {"steiger": None}
        return rep, {"steiger": asdict(steiger_spearman(ia["cosine"], ib["cosine"], ia["gold"]))}
    if a.kind == "classification":
        if "fold" in ia:
            rep = paired_mean(
                fold_accuracies(ia),
                fold_accuracies(ib),
                unit="outer folds",
                scale=1.0,
                n_resamples=n_resamples,
                seed=seed,
            )
        else:
            rep = paired_accuracy(ia["pred"], ib["pred"], ia["gold"], n_resamples=n_resamples, seed=seed)
        return rep, {"mcnemar": asdict(mcnemar(ia["pred"], ib["pred"], ia["gold"]))}
    if a.kind == "ranking":
        if main_metric not in ia:
            raise InvalidInputError(f"{task}: no per-query values for {main_metric!r} (have {', '.join(ia)})")
        return paired_mean(ia[main_metric], ib[main_metric], unit="queries", n_resamples=n_resamples, seed=seed), {}
    raise InvalidInputError(f"{task}: unknown kind of per-item outputs {a.kind!r}")


def column_test_p(task: str, metric: str, a: Evaluation, b: Evaluation, seed: int = 0) -> float:
    """A quick paired p-value for the leaderboard's marks (many pairs of rows, so no Spearman
    resampling): Steiger's test for STS, exact McNemar for a fixed transfer test set, the paired
    permutation test on the per-fold accuracies (k-fold transfer) or the per-query values (ranking)."""
    check_same_items(task, a, b)
    ia, ib = a.items, b.items
    if a.kind == "sts" and metric == "pearson":
        return steiger_pearson(ia["cosine"], ib["cosine"], ia["gold"]).p_value
    if a.kind == "sts":
        return steiger_spearman(ia["cosine"], ib["cosine"], ia["gold"]).p_value
    if a.kind == "classification":
        if "fold" in ia:
            return paired_mean(
                fold_accuracies(ia), fold_accuracies(ib), unit="outer folds", scale=1.0, seed=derive_seed(seed, task)
            ).p_value()
        return mcnemar(ia["pred"], ib["pred"], ia["gold"]).p_value
    if a.kind == "ranking":
        return paired_mean(ia[metric], ib[metric], unit="queries", seed=derive_seed(seed, task)).p_value()
    raise InvalidInputError(f"{task}: unknown kind of per-item outputs {a.kind!r}")
