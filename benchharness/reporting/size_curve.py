"""Quality against size: each encoder's truncated and quantized variants as one curve a task, the
score (with its 95% interval) against the bytes one vector takes, on a log axis.

An encoder's sizes are the results whose names add ``+truncate`` or ``+quantize`` stages to it
(``minilm-l6+truncate(d=64)+quantize(precision=binary)`` is a size of ``minilm-l6``), with the
encoder itself as the full vector; the bytes come from each result's ``embedding_stats``. Nothing
is encoded: the curve is drawn from stored results.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchharness.core.results import Result
from benchharness.core.specs import split_composition

#: the stages that make a vector smaller
SIZE_STAGES = ("truncate", "quantize")


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


def _bytes(result: Result) -> float | None:
    return (result.embedding_stats or {}).get("bytes_per_vector")


def size_families(results: Iterable[Result]) -> dict[str, dict[str, list[Result]]]:
    """By base encoder, then task: its results at two or more sizes (the base's own result, the
    full vector, among them when stored), smallest first; results that record no size are left out."""
    listed = [r for r in results if _bytes(r) is not None]
    bases = {base for r in listed if (base := base_of(r.encoder)) is not None}
    families: dict[str, dict[str, list[Result]]] = {}
    for base in sorted(bases):
        for r in listed:
            if r.encoder == base or base_of(r.encoder) == base:
                families.setdefault(base, {}).setdefault(r.task, []).append(r)
    for base, by_task in families.items():
        families[base] = {
            task: sorted(rs, key=lambda r: (_bytes(r), r.encoder)) for task, rs in by_task.items() if len(rs) > 1
        }
    return {base: by_task for base, by_task in families.items() if by_task}


def precision_of(encoder: str) -> str:
    """The precision a size's vectors are stored in: its ``+quantize`` stage's, else float32."""
    for part in split_composition(encoder)[1:]:
        if part.startswith("quantize("):
            for pair in part[len("quantize(") : -1].split(","):
                key, _, value = pair.partition("=")
                if key.strip() == "precision":
                    return value.strip()
    return "float32"


def size_figure(families: dict[str, dict[str, list[Result]]]) -> Any:
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
            lines: dict[str, list[Result]] = {}
            for r in by_task.get(task, []):
                lines.setdefault(precision_of(r.encoder), []).append(r)
            for precision, points in lines.items():
                metric = points[0].main_metric
                xs = [_bytes(r) for r in points]
                ys = [r.main_score for r in points]
                main = [(r.confidence or {}).get("main") for r in points]
                errors = [
                    [max(0.0, y - m[0]) if m else 0.0 for y, m in zip(ys, main)],
                    [max(0.0, m[1] - y) if m else 0.0 for y, m in zip(ys, main)],
                ]
                label = f"{base} {precision}".replace("$", r"\$")
                ax.errorbar(xs, ys, yerr=errors, marker="o", markersize=3, capsize=2, linewidth=1, label=label)
                for x, y, r in zip(xs, ys, points):
                    d = next(
                        (p[len("truncate(") : -1] for p in split_composition(r.encoder) if p.startswith("truncate(")),
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
