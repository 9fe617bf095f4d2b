"""Is a smaller vector worse, and is the loss real? Each size of an encoder (``x+truncate(d=32|64)``,
``x+quantize(precision=int8|binary)``) against its full vector, task by task.

The tests are ``benchharness.compare``'s (paired bootstrap CI, paired permutation p), one per size
and task; Holm adjusts them across the whole table, the family of tests it makes. A size is marked
significantly below the full vector where its difference is negative and its Holm-adjusted p under
0.05. Nothing is encoded: the rows come from results and their per-item outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchharness.core.errors import InvalidInputError
from benchharness.reporting.compare import Pair, Row, compare_pairs
from benchharness.reporting.escape import md_cell, one_line
from benchharness.scoring.confidence import RESAMPLES
from benchharness.scoring.stats import holm

#: the family-wise level at which a size is marked significantly below the full vector
ALPHA = 0.05


@dataclass
class SizeRow:
    """One size on one task against the full vector (``row``: the paired test, A = the size)."""

    encoder: str
    bytes_per_vector: float | None
    row: Row

    @property
    def below(self) -> bool:
        """Significantly below the full vector (Holm-adjusted p < ALPHA and a negative difference)."""
        return self.row.difference < 0 and self.row.p_holm is not None and self.row.p_holm < ALPHA


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
    from tabulate import tabulate

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
        f"every row above; below: significantly below the full vector (negative, p (Holm) < {ALPHA})."
    )
    return (
        tabulate(
            table,
            headers=["size", "bytes", "task", "size score", "full", "difference", "95% CI", "p (Holm)", ""],
            tablefmt="github",
            disable_numparse=True,
        )
        + "\n\n"
        + legend
    )
