"""Quality against size: each encoder's truncated and quantized variants as one curve a task, the
score (with its 95% interval) against the bytes one vector takes, on a log axis.

An encoder's sizes are the encoders whose names add ``+truncate`` or ``+quantize`` stages to it
(``minilm-l6+truncate(d=64)+quantize(precision=binary)`` is a size of ``minilm-l6``), with the
encoder itself as the full vector. The points come from stored results (``size_families``: the
bytes from each result's ``embedding_stats``; nothing is encoded) or from any other scores of the
same shape (``group_sizes``: ``benchharness analyze`` draws its STS-B test correlations).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchharness.core.results import Result
from benchharness.core.specs import split_composition

#: the stages that make a vector smaller
SIZE_STAGES = ("truncate", "quantize")


@dataclass(frozen=True)
class SizePoint:
    """One encoder's score on one task and the bytes one of its vectors takes: a point of a curve."""

    encoder: str
    task: str
    metric: str
    score: float
    interval: tuple[float, float] | None
    bytes_per_vector: float

    @classmethod
    def of(cls, result: Result) -> SizePoint | None:
        """The point of a stored result; None when it records no size."""
        size = (result.embedding_stats or {}).get("bytes_per_vector")
        if size is None or result.main_score is None:
            return None
        main = (result.confidence or {}).get("main")
        return cls(
            result.encoder,
            result.task,
            result.main_metric,
            result.main_score,
            (main[0], main[1]) if main else None,
            float(size),
        )


def base_of(encoder: str) -> str | None:
    """The encoder a name is a size of (the name up to its first size stage), or None."""
    try:
        parts = split_composition(encoder)
    except KeyError:  # not a composition the grammar reads
        return None
    for i, part in enumerate(parts[1:], 1):
        if part.split("(", 1)[0] in SIZE_STAGES:
            return "+".join(parts[:i])
    return None


def group_sizes(points: Iterable[SizePoint]) -> dict[str, dict[str, list[SizePoint]]]:
    """By base encoder, then task: its points at two or more sizes (the base's own, the full
    vector, among them when given), smallest first."""
    listed = list(points)
    bases = {base for p in listed if (base := base_of(p.encoder)) is not None}
    families: dict[str, dict[str, list[SizePoint]]] = {}
    for base in sorted(bases):
        by_task: dict[str, list[SizePoint]] = {}
        for p in listed:
            if p.encoder == base or base_of(p.encoder) == base:
                by_task.setdefault(p.task, []).append(p)
        kept = {
            task: sorted(ps, key=lambda p: (p.bytes_per_vector, p.encoder))
            for task, ps in by_task.items()
            if len(ps) > 1
        }
        if kept:
            families[base] = kept
    return families


def size_families(results: Iterable[Result]) -> dict[str, dict[str, list[SizePoint]]]:
    """``group_sizes`` of stored results; results that record no size are left out."""
    return group_sizes(p for r in results if (p := SizePoint.of(r)) is not None)


def precision_of(encoder: str) -> str:
    """The precision a size's vectors are stored in: its ``+quantize`` stage's, else float32."""
    for part in split_composition(encoder)[1:]:
        if part.startswith("quantize("):
            for pair in part[len("quantize(") : -1].split(","):
                key, _, value = pair.partition("=")
                if key.strip() == "precision":
                    return value.strip()
    return "float32"


def size_figure(families: dict[str, dict[str, list[SizePoint]]]) -> Any:
    """One panel a task; in each, one line a base encoder and precision (float32 for truncation
    alone and the full vector): score with its 95% interval against bytes per vector (log scale),
    each point labelled with its truncation. None without families."""
    from benchharness.reporting.analysis import pyplot_agg

    if not families:
        return None
    plt = pyplot_agg()
    tasks = sorted({task for by_task in families.values() for task in by_task})
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        metric = "score"
        for base, by_task in families.items():
            lines: dict[str, list[SizePoint]] = {}
            for p in by_task.get(task, []):
                lines.setdefault(precision_of(p.encoder), []).append(p)
            for precision, points in lines.items():
                metric = points[0].metric
                xs = [p.bytes_per_vector for p in points]
                ys = [p.score for p in points]
                main = [p.interval for p in points]
                errors = [
                    [max(0.0, y - m[0]) if m else 0.0 for y, m in zip(ys, main)],
                    [max(0.0, m[1] - y) if m else 0.0 for y, m in zip(ys, main)],
                ]
                label = f"{base} {precision}".replace("$", r"\$")
                ax.errorbar(xs, ys, yerr=errors, marker="o", markersize=3, capsize=2, linewidth=1, label=label)
                for x, y, point in zip(xs, ys, points):
                    d = next(
                        (
                            p[len("truncate(") : -1]
                            for p in split_composition(point.encoder)
                            if p.startswith("truncate(")
                        ),
                        "",
                    )
                    ax.annotate(d or "full", (x, y), fontsize=5, xytext=(2, -7), textcoords="offset points")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per vector", fontsize=8)
        ax.set_ylabel(metric, fontsize=8)
        ax.set_title(task.replace("$", r"\$"), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig
