"""``benchharness compare A B --tasks ...``: is A different from B, task by task, on the same items?

Everything comes from stored results and their per-item outputs (``benchharness.core.items``): nothing
is encoded. Per task: both scores, A - B with its paired-bootstrap CI, the paired permutation
p-value, that p-value Holm-adjusted across the compared tasks (the family of tests the table
makes), and the closed-form cross-check (Steiger's Z for STS, McNemar for transfer). Then one Avg.
row per kind of task (STS, transfer, ranking), like the leaderboard's Avg. column: the difference of
the averages, whose CI and p-value come from averaging the tasks' resamples (tasks are resampled
independently); Avg. rows are not part of the Holm family (they restate the tasks' evidence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.results import Result, ResultStore
from benchharness.scoring.confidence import RESAMPLES, paired
from benchharness.scoring.stats import PairedReplicates, average_paired, holm

KIND_LABELS = {"sts": "STS", "classification": "transfer", "ranking": "ranking"}


@dataclass
class Row:
    task: str
    score_a: float
    score_b: float
    difference: float
    low: float
    high: float
    p_value: float
    unit: str
    p_holm: float | None = None
    crosscheck: dict[str, Any] = field(default_factory=dict)


def _load(store: ResultStore, encoder: str, task: str) -> Result:
    result = store.load(encoder, task)
    if result is None:
        raise MissingFileError(f"no stored result for {encoder} on {task} under {store.root}; produce it with: "
                               f"{store.run_command(encoder, task)}")
    return result


def _row(task: str, score_a: float, score_b: float, rep: PairedReplicates, crosscheck: dict[str, Any]) -> Row:
    c = rep.comparison()
    return Row(task, score_a, score_b, c.difference, c.low, c.high, c.p_value, c.unit, crosscheck=crosscheck)


def compare(store: ResultStore, encoder_a: str, encoder_b: str, task_names: list[str],
            n_resamples: int = RESAMPLES, seed: int = 0) -> list[Row]:
    """Per-task rows (Holm-adjusted), then one Avg. row per kind of task with more than one task."""
    rows: list[Row] = []
    by_kind: dict[str, list[tuple[PairedReplicates, Result, Result]]] = {}
    for task in task_names:
        a, b = _load(store, encoder_a, task), _load(store, encoder_b, task)
        items_a, items_b = store.load_items(a), store.load_items(b)
        rep, cross = paired(task, a.main_metric, items_a, items_b, n_resamples=n_resamples, seed=seed)
        if abs(rep.difference - (a.main_score - b.main_score)) > 0.011:  # scores stored rounded to 0.01 at most
            raise InvalidInputError(f"{task}: the items give A - B = {rep.difference:.4f}, the stored scores "
                             f"{a.main_score - b.main_score:.4f}; the items do not belong to these results")
        rows.append(_row(task, a.main_score, b.main_score, rep, cross))
        by_kind.setdefault(items_a.kind, []).append((rep, a, b))
    for row, adjusted in zip(rows, holm([r.p_value for r in rows]) if rows else []):
        row.p_holm = adjusted
    for kind, members in by_kind.items():
        if len(members) > 1:
            avg = average_paired([rep for rep, _, _ in members])
            n = len(members)
            rows.append(_row(f"Avg. ({KIND_LABELS.get(kind, kind)}, {n} tasks)",
                             sum(a.main_score for _, a, _ in members) / n,
                             sum(b.main_score for _, _, b in members) / n, avg, {}))
    return rows


def _p(p: float | None) -> str:
    if p is None:
        return ""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def render(rows: list[Row], encoder_a: str, encoder_b: str) -> str:
    from tabulate import tabulate

    table = []
    for r in rows:
        check = ""
        if "steiger" in r.crosscheck:
            check = f"Steiger z={r.crosscheck['steiger']['z']:.2f} p={_p(r.crosscheck['steiger']['p_value'])}"
        elif "mcnemar" in r.crosscheck:
            m = r.crosscheck["mcnemar"]
            check = f"McNemar {m['a_only']}/{m['b_only']} p={_p(m['p_value'])}"
        table.append([r.task, f"{r.score_a:.2f}", f"{r.score_b:.2f}", f"{r.difference:+.2f}",
                      f"[{r.low:+.2f}, {r.high:+.2f}]", _p(r.p_value), _p(r.p_holm), check, r.unit])
    legend = (f"A = {encoder_a}, B = {encoder_b}. A-B with its 95% paired-bootstrap CI; p: paired permutation "
              "test (two-sided; the smallest p that B resamples can give is 1/(B+1)); Holm: adjusted across "
              "the tasks above; cross-check: Steiger's test for "
              "dependent correlations (STS), McNemar on the test predictions (transfer; A-only/B-only right). "
              "Avg. rows: the difference of the averages over the tasks of that kind, not in the Holm family.")
    return tabulate(table, headers=["task", "A", "B", "A-B", "95% CI", "p", "p (Holm)", "cross-check", "resampled"],
                    tablefmt="github", disable_numparse=True) + "\n\n" + legend
