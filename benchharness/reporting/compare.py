"""Is A different from B, task by task, on the same items? ``benchharness.compare`` (in-memory or
loaded results) and ``benchharness compare A B --tasks ...`` (a results folder) share this code.

Everything comes from results and their per-item outputs (``benchharness.core.items``): nothing
is encoded. Per task: both scores, A - B with its paired-bootstrap CI, the paired permutation
p-value, that p-value Holm-adjusted across the compared tasks (the family of tests the table
makes), and the closed-form cross-check (Steiger's Z for STS, McNemar for transfer). Then one Avg.
row per kind of task (STS, transfer, ranking), like the leaderboard's Avg. column: the difference of
the averages, whose CI and p-value come from averaging the tasks' resamples (tasks are resampled
independently); Avg. rows are not part of the Holm family (they restate the tasks' evidence).

Given a value list as A (``x+truncate(d=32|64)``, ``x+quantize(precision=int8|binary)``), each size
is compared with B, its full vector, task by task: one test per size and task, Holm across the whole
table (the family of tests it makes), and a size marked significantly below the full vector where its
difference is negative and its Holm-adjusted p under 0.05.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.results import Result, ResultStore
from benchharness.core.task import Evaluation
from benchharness.encoders.pipeline import ALWAYS_RERANK_POSITIVES, reranks_misses
from benchharness.evaluation.results import Results
from benchharness.reporting.board import ImportedModel
from benchharness.reporting.escape import md_cell, one_line
from benchharness.scoring.confidence import RESAMPLES, paired
from benchharness.scoring.stats import PairedReplicates, average_paired, holm

if TYPE_CHECKING:
    import pandas as pd

KIND_LABELS = {
    "sts": "STS",
    "classification": "transfer",
    "ranking": "ranking",
    "sts-pearson": "supervised relatedness, Pearson",
}


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
    #: whether A's and B's scores were computed under a pipeline's ``always_rerank_positives`` protocol
    misses_reranked: tuple[bool, bool] = (False, False)


@dataclass
class Comparison:
    """The rows of a comparison of A with B; printed, it is the table ``benchharness compare`` prints."""

    encoder_a: str
    encoder_b: str
    rows: list[Row]

    def __str__(self) -> str:
        return render(self.rows, self.encoder_a, self.encoder_b)

    def _repr_markdown_(self) -> str:  # notebooks render the table
        return str(self)

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.__dict__.items() if k != "crosscheck"} for r in self.rows])


#: one compared task: A's result and items, then B's
Pair = tuple[Result, Evaluation, Result, Evaluation]


def _row(task: str, score_a: float, score_b: float, rep: PairedReplicates, crosscheck: dict[str, Any]) -> Row:
    c = rep.comparison()
    return Row(task, score_a, score_b, c.difference, c.low, c.high, c.p_value, c.unit, crosscheck=crosscheck)


def compare_pairs(pairs: list[Pair], n_resamples: int = RESAMPLES, seed: int = 0) -> list[Row]:
    """Per-task rows (Holm-adjusted), then one Avg. row per kind of task with more than one task."""
    rows: list[Row] = []
    by_kind: dict[str, list[tuple[PairedReplicates, Result, Result]]] = {}
    for a, items_a, b, items_b in pairs:
        rep, cross = paired(a.task, a.main_metric, items_a, items_b, n_resamples=n_resamples, seed=seed)
        if abs(rep.difference - (a.main_score - b.main_score)) > 0.011:  # scores stored rounded to 0.01 at most
            raise InvalidInputError(
                f"{a.task}: the items give A - B = {rep.difference:.4f}, the scores "
                f"{a.main_score - b.main_score:.4f}; the items do not belong to these results"
            )
        rows.append(_row(a.task, a.main_score, b.main_score, rep, cross))
        rows[-1].misses_reranked = (reranks_misses(a.protocol), reranks_misses(b.protocol))
        # tasks scored by Pearson (a regressor's predictions) are averaged apart from the Spearman STS tasks
        kind = f"{items_a.kind}-pearson" if a.main_metric == "pearson" else items_a.kind
        by_kind.setdefault(kind, []).append((rep, a, b))
    for row, adjusted in zip(rows, holm([r.p_value for r in rows]) if rows else []):
        row.p_holm = adjusted
    for kind, members in by_kind.items():
        if len(members) > 1:
            avg = average_paired([rep for rep, _, _ in members])
            n = len(members)
            rows.append(
                _row(
                    f"Avg. ({KIND_LABELS.get(kind, kind)}, {n} tasks)",
                    sum(a.main_score for _, a, _ in members) / n,
                    sum(b.main_score for _, _, b in members) / n,
                    avg,
                    {},
                )
            )
    return rows


def compare_stored(
    store: ResultStore,
    encoder_a: str,
    encoder_b: str,
    task_names: list[str],
    n_resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[Row]:
    """``benchharness compare``: the two encoders' stored results on ``task_names``. Every missing
    result is named at once, with the one command that computes them all."""
    return compare_pairs(stored_pairs(store, [encoder_a], encoder_b, task_names)[encoder_a], n_resamples, seed)


def stored_pairs(
    store: ResultStore, encoders_a: list[str], encoder_b: str, task_names: list[str]
) -> dict[str, list[Pair]]:
    """Each of ``encoders_a`` paired with ``encoder_b`` on ``task_names``, from a results folder.
    Every missing result is named at once, with the one command that computes them all."""
    found = stored_results(store, list(dict.fromkeys([*encoders_a, encoder_b])), task_names)
    pairs: dict[str, list[Pair]] = {}
    for encoder in encoders_a:
        for task in task_names:
            a, b = found[(encoder, task)], found[(encoder_b, task)]
            pairs.setdefault(encoder, []).append((a, store.load_items(a), b, store.load_items(b)))
    return pairs


def stored_results(store: ResultStore, encoders: list[str], task_names: list[str]) -> dict[tuple[str, str], Result]:
    """Each encoder's stored result on each task; every missing one is named at once, with the one
    command that computes them all."""
    found = {(e, t): store.load(e, t) for t in task_names for e in encoders}
    missing = [key for key, result in found.items() if result is None]
    if missing:
        names = ",".join(e for e in encoders if any(m[0] == e for m in missing))
        tasks = ",".join(t for t in task_names if any(m[1] == t for m in missing))
        listed = ", ".join(f"{e} on {t}" for e, t in missing)
        raise MissingFileError(
            f"no stored result for {listed} under {store.root}; produce them with: {store.run_command(names, tasks)}"
        )
    return {key: result for key, result in found.items() if result is not None}


def _one_encoder(results: Results, encoder: str | None, side: str) -> str:
    names = results.encoders
    if encoder is not None:
        if encoder not in names:
            raise InvalidInputError(f"{side}: no results of {encoder!r}; these are of {', '.join(names) or 'none'}")
        return encoder
    if len(names) != 1:
        raise InvalidInputError(
            f"{side} holds results of {len(names)} encoders ({', '.join(names) or 'none'}); "
            f"name one with encoder_{side[-1].lower()}="
        )
    return names[0]


def compare(
    results_a: Results,
    results_b: Results,
    tasks: list[str] | None = None,
    *,
    encoder_a: str | None = None,
    encoder_b: str | None = None,
    n_resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison | SizeComparison:
    """Paired tests of A against B on every task both have (or on ``tasks``), from the results'
    per-item outputs: in memory when ``evaluate`` computed them, else read from the folder they
    were stored in. The statistics, intervals and Holm correction are those of ``benchharness
    compare``. A ``Results`` of several encoders needs ``encoder_a=`` / ``encoder_b=``.

    ``encoder_a`` with a value list (``x+truncate(d=32|64)``) compares each size with B, the full
    vector, in one Holm family, and returns a ``SizeComparison`` that marks the sizes significantly
    below it."""
    from benchharness.core.specs import expand_variants

    name_b = _one_encoder(results_b, encoder_b, "results_b")
    sizes = expand_variants(encoder_a) if encoder_a is not None else []
    if len(sizes) > 1:
        per_size = {size: _pairs(results_a, size, results_b, name_b, tasks) for size in sizes}
        return compare_sizes(per_size, name_b, n_resamples, seed)
    name_a = _one_encoder(results_a, encoder_a, "results_a")
    return Comparison(
        name_a, name_b, compare_pairs(_pairs(results_a, name_a, results_b, name_b, tasks), n_resamples, seed)
    )


def _pairs(results_a: Results, name_a: str, results_b: Results, name_b: str, tasks: list[str] | None) -> list[Pair]:
    """A's and B's results and items on every task both have (or on ``tasks``)."""
    _one_encoder(results_a, name_a, "results_a")
    on_b = set(results_b.select(name_b).tasks)
    chosen = [t for t in results_a.select(name_a).tasks if t in on_b] if tasks is None else list(tasks)
    if not chosen:
        raise InvalidInputError(f"{name_a} and {name_b} have no task in common to compare")
    pairs = []
    for task in chosen:
        try:
            a, b = results_a.get(name_a, task), results_b.get(name_b, task)
        except KeyError as exc:
            raise InvalidInputError(f"cannot compare on {task}: {exc.args[0]}") from None
        pairs.append((a, results_a.items(a), b, results_b.items(b)))
    return pairs


#: marks a score computed under the ``always_rerank_positives`` protocol, wherever a comparison shows it
MISSES_MARK = "‡"
MISSES_NOTE = (
    f"{MISSES_MARK}: scored under sentence-transformers' {ALWAYS_RERANK_POSITIVES} protocol: the relevant documents "
    "the first stage missed were reranked too, so the score credits the reranker with the first stage's misses"
)


def _p(p: float | None) -> str:
    if p is None:
        return ""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def render(rows: list[Row], encoder_a: str, encoder_b: str) -> str:
    table = []
    for r in rows:
        check = ""
        if "steiger" in r.crosscheck and r.crosscheck["steiger"] is None:
            check = "Steiger: none (A and B rank every pair alike)"
        elif "steiger" in r.crosscheck:
            check = f"Steiger z={r.crosscheck['steiger']['z']:.2f} p={_p(r.crosscheck['steiger']['p_value'])}"
        elif "mcnemar" in r.crosscheck:
            m = r.crosscheck["mcnemar"]
            check = f"McNemar {m['a_only']}/{m['b_only']} p={_p(m['p_value'])}"
        marks = [MISSES_MARK if flagged else "" for flagged in r.misses_reranked]
        table.append(
            [
                md_cell(r.task),
                f"{r.score_a:.2f}{marks[0]}",
                f"{r.score_b:.2f}{marks[1]}",
                f"{r.difference:+.2f}",
                f"[{r.low:+.2f}, {r.high:+.2f}]",
                _p(r.p_value),
                _p(r.p_holm),
                check,
                r.unit,
            ]
        )
    legend = (
        f"A = {one_line(encoder_a)}, B = {one_line(encoder_b)}. A-B with its 95% paired-bootstrap CI; "
        "p: paired permutation test (two-sided; the smallest p that B resamples can give is 1/(B+1)); "
        "Holm: adjusted across the tasks above; cross-check: Steiger's test for "
        "dependent correlations (STS), McNemar on the test predictions (transfer; A-only/B-only right). "
        "Avg. rows: the difference of the averages over the tasks of that kind, not in the Holm family."
    )
    if any(any(r.misses_reranked) for r in rows):
        legend += " " + MISSES_NOTE + "."
    return _table(table, ["task", "A", "B", "A-B", "95% CI", "p", "p (Holm)", "cross-check", "resampled"], legend)


def _table(rows: list[list[str]], headers: list[str], legend: str) -> str:
    """A comparison as text: the rows as a GitHub table (cells as written), then its legend."""
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n\n" + legend


#: the family-wise level at which a size is marked significantly below the full vector
SIZE_ALPHA = 0.05


@dataclass
class SizeRow:
    """One size on one task against the full vector (``row``: the paired test, A = the size)."""

    encoder: str
    bytes_per_vector: float | None
    row: Row

    @property
    def below(self) -> bool:
        """Significantly below the full vector (Holm-adjusted p < SIZE_ALPHA and a negative difference)."""
        return self.row.difference < 0 and self.row.p_holm is not None and self.row.p_holm < SIZE_ALPHA


@dataclass
class SizeComparison:
    """Every size against the full vector; printed, the table ``benchharness compare`` prints for
    several sizes."""

    full: str
    rows: list[SizeRow]

    def __str__(self) -> str:
        return render_sizes(self)

    def _repr_markdown_(self) -> str:
        return str(self)


def compare_sizes(
    pairs: dict[str, list[Pair]], full: str, n_resamples: int = RESAMPLES, seed: int = 0
) -> SizeComparison:
    """``pairs``: for each size, its (size, full) pairs of results and items, task by task."""
    if not pairs:
        raise InvalidInputError(f"no size to compare with {full}")
    rows = [
        SizeRow(encoder, _bytes(size_pairs[0][0]), row)
        for encoder, size_pairs in pairs.items()
        for row in compare_pairs(size_pairs, n_resamples, seed)
        if not row.task.startswith("Avg. (")
    ]
    for size_row, adjusted in zip(rows, holm([r.row.p_value for r in rows])):
        size_row.row.p_holm = adjusted
    return SizeComparison(full, rows)


def _bytes(result: object) -> float | None:
    stats = getattr(result, "embedding_stats", None) or {}
    return stats.get("bytes_per_vector")


def render_sizes(comparison: SizeComparison) -> str:
    table = [
        [
            md_cell(r.encoder),
            "" if r.bytes_per_vector is None else f"{r.bytes_per_vector:g}",
            md_cell(r.row.task),
            f"{r.row.score_a:.2f}",
            f"{r.row.score_b:.2f}",
            f"{r.row.difference:+.2f}",
            f"[{r.row.low:+.2f}, {r.row.high:+.2f}]",
            f"{r.row.p_holm:.3f}" if r.row.p_holm is not None and r.row.p_holm >= 0.001 else f"{r.row.p_holm:.1e}",
            "below" if r.below else "",
        ]
        for r in comparison.rows
    ]
    legend = (
        f"full = {one_line(comparison.full)}. Each size against the full vector on the same items: the "
        "difference with its 95% paired-bootstrap CI and the paired permutation p, Holm-adjusted across "
        f"every row above; below: significantly below the full vector (negative, p (Holm) < {SIZE_ALPHA})."
    )
    headers = ["size", "bytes", "task", "size score", "full", "difference", "95% CI", "p (Holm)", ""]
    return _table(table, headers, legend)


def compare_published(store: ResultStore, encoder_a: str, published: ImportedModel, task_names: list[str]) -> str:
    """A measured encoder's stored scores beside a published mteb model's, task by task: the
    difference only, since a published result keeps no per-item outputs to test on. Every
    missing measured result is named at once, with the command that computes them."""
    found = stored_results(store, [encoder_a], task_names)
    rows = []
    for (_, task), result in found.items():
        b = published.score(task)
        rows.append(
            [
                md_cell(task),
                f"{result.main_score:.2f}",
                "" if b is None else f"{b:.2f}",
                "" if b is None else f"{result.main_score - b:+.2f}",
            ]
        )
    legend = (
        f"A = {one_line(encoder_a)}, measured here; B = {one_line(published.name)}, published (mteb results "
        f"{one_line(published.source)}), its main score for each task as mteb's leaderboard takes it. No interval "
        "or test: a published result keeps no per-item outputs. An empty B: the folder has no score for all of "
        "that task."
    )
    return _table(rows, ["task", "A", "B (published)", "A-B"], legend)
