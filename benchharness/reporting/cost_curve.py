"""Quality against cost for every kind of model: each (encoder, task) result is one point, its score
with its 95% interval against two costs of a search index, on log axes, one row of panels a task.

- **Bytes per document**: what one document takes in the index scored. A dense vector takes its
  ``embedding_stats`` ``bytes_per_vector`` (4 a value; a ``+quantize`` code's size), or what the
  task's own index held per document when that is smaller (a retrieval task declared with
  ``search = "int8"`` or ``"binary"`` records ``index_bytes`` for its ``n_corpus`` documents); a
  sparse or multi-vector model's view records ``bytes_per_document`` after its search (a CSR row's
  values and column indices, or the float32 token vectors).
- **Operations per query-document pair**: the products of a query value with a document value that
  scoring one pair needs, each added to a sum: ``d`` for a dense vector of ``d`` dimensions, float32
  or int8 alike (the ``dimensions`` its result records); for binary codes, one one-bit operation a
  bit of the code (``+quantize`` records whole bytes' bits: 56 for 50 dimensions), an XOR and a
  count of the differing bits, 64 to a machine word: far cheaper than the count says, so the kind
  is always drawn beside it; a sparse model's ``avg_flops``, sentence-transformers' expected number
  of terms active in both the query and the document, each a multiply-add in an inverted index; a
  multi-vector model's tokens per query x tokens per document x the token dimension, every token
  pair's dot product (MaxSim's maxima, a comparison a pair of tokens, are left out: a fraction
  1 / dimension more).

A cross-encoder has neither: it keeps no index and reads each pair through the whole model. The
points come from stored results alone (nothing is encoded). A task gets a row of panels when a
sparse or multi-vector model has a point on it; the dense results of the same task are drawn beside
(the size curve, ``reporting.size_curve``, shows dense sizes alone). Tasks are never mixed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from benchharness.core.kinds import DENSE, MULTI_VECTOR, SPARSE
from benchharness.core.results import Result
from benchharness.reporting.size_curve import precision_of

BYTES_UNIT = "bytes per document"
WORK_UNIT = "operations per query-document pair"
#: what the axes count, written beside ``benchharness analyze``'s points
UNITS = {
    "bytes_per_document": "bytes one document takes in the index scored",
    "work": "products of a query value with a document value to score one pair, each added to a sum: "
    "dense d (float32 or int8), binary a one-bit operation a bit of the code (64 to a word), sparse "
    "avg_flops (terms active in both), multi-vector query tokens x document tokens x token dimension",
}
#: the kinds a task needs one of to get panels: those the size curve cannot show
OTHER_KINDS = (SPARSE, MULTI_VECTOR)
#: how each kind is drawn (colour, marker), in the order of the legend
STYLES = {
    "dense float32": ("tab:blue", "o"),
    "dense int8": ("tab:cyan", "s"),
    "dense uint8": ("tab:cyan", "s"),
    "dense binary": ("tab:purple", "D"),
    "dense ubinary": ("tab:purple", "D"),
    SPARSE: ("tab:orange", "^"),
    MULTI_VECTOR: ("tab:green", "*"),
}


@dataclass(frozen=True)
class CostPoint:
    """One encoder's score on one task, with what one document takes and the work of one pair."""

    encoder: str
    task: str
    #: the model's kind, a dense one's with the precision of the vectors scored ("dense binary")
    kind: str
    metric: str
    score: float
    interval: tuple[float, float] | None
    bytes_per_document: float
    #: operations per query-document pair (see the module docstring)
    work: float

    @classmethod
    def of(cls, result: Result) -> CostPoint | None:
        """The point of a stored result; None when it records no cost (a cross-encoder, a sparse
        model scored on pairs rather than by a search, a result without sizes)."""
        cost = _cost(result)
        if cost is None:
            return None
        main = (result.confidence or {}).get("main")
        return cls(
            result.encoder,
            result.task,
            cost[0],
            result.main_metric,
            result.main_score,
            (main[0], main[1]) if main else None,
            cost[1],
            cost[2],
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cost(result: Result) -> tuple[str, float, float] | None:
    """(kind, bytes per document, operations per pair) of a result, or None."""
    metrics = result.metrics
    kind = dict(result.protocol).get("model_kind", DENSE)
    if kind == SPARSE:
        size, flops = _number(metrics, "bytes_per_document"), _number(metrics, "avg_flops")
        return None if size is None or flops is None else (SPARSE, size, flops)
    if kind == MULTI_VECTOR:
        size = _number(metrics, "bytes_per_document")
        query, document, dimension = (
            _number(metrics, key) for key in ("tokens_per_query", "tokens_per_document", "token_dimension")
        )
        if size is None or query is None or document is None or dimension is None:
            return None
        return MULTI_VECTOR, size, query * document * dimension
    if kind == DENSE:
        return _dense(result)
    return None  # a cross-encoder keeps no index


def _dense(result: Result) -> tuple[str, float, float] | None:
    """A dense vector's cost: its own bytes, or its task's quantized index's when smaller."""
    stats = result.embedding_stats or {}
    dimensions, size = stats.get("dimensions"), stats.get("bytes_per_vector")
    if dimensions is None or size is None:
        return None
    try:
        precision = precision_of(result.encoder)
    except KeyError:  # a name the composition grammar does not read (an object's): no quantize stage
        precision = "float32"
    index, documents = _number(result.metrics, "index_bytes"), _number(result.metrics, "n_corpus")
    if index is not None and documents and index / documents < size:
        size = index / documents
        # the task searched codes: a byte a dimension (int8), or a bit (binary: fewer bytes than dimensions)
        precision = "binary" if size < dimensions else "int8"
    return f"dense {precision}", float(size), float(dimensions)


def _number(metrics: dict[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cost_points(results: Iterable[Result]) -> dict[str, list[CostPoint]]:
    """By task, the points of the tasks where a sparse or multi-vector model has one, each task's
    ordered by kind (as the legend), then bytes, then encoder; tasks by name."""
    by_task: dict[str, list[CostPoint]] = {}
    for result in results:
        point = CostPoint.of(result)
        if point is not None:
            by_task.setdefault(point.task, []).append(point)
    order = {kind: i for i, kind in enumerate(STYLES)}
    return {
        task: sorted(points, key=lambda p: (order.get(p.kind, len(order)), p.bytes_per_document, p.encoder))
        for task, points in sorted(by_task.items())
        if any(p.kind in OTHER_KINDS for p in points)
    }


def amount(value: float) -> str:
    """A count as tables show it: whole above 100 (with thousands separators), else 3 digits."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def cost_lines(points: list[CostPoint]) -> list[str]:
    """One line a point, for a terminal: encoder, kind, score [interval], bytes and operations."""
    lines = []
    for p in points:
        interval = f" [{p.interval[0]:.2f}, {p.interval[1]:.2f}]" if p.interval else ""
        lines.append(
            f"  {p.encoder} ({p.kind}): {p.metric} {p.score:.2f}{interval}, {amount(p.bytes_per_document)} "
            f"{BYTES_UNIT}, {amount(p.work)} {WORK_UNIT}"
        )
    return lines


def cost_figure(by_task: dict[str, list[CostPoint]]) -> Any:
    """A row a task: its score with the 95% interval against bytes per document (left) and against
    operations per query-document pair (right), both on log scales, a colour and marker a kind,
    each point labelled with its encoder. None without points."""
    from benchharness.reporting.analysis import pyplot_agg

    if not by_task:
        return None
    plt = pyplot_agg()
    fig, axes = plt.subplots(len(by_task), 2, figsize=(9.0, 3.4 * len(by_task)), squeeze=False)
    for (left, right), (task, points) in zip(axes, by_task.items()):
        for ax, axis, unit in ((left, "bytes_per_document", BYTES_UNIT), (right, "work", WORK_UNIT)):
            _draw(ax, points, axis)
            ax.set_xscale("log", base=10)
            ax.set_xlabel(unit, fontsize=8)
            ax.set_ylabel(points[0].metric, fontsize=8)
            ax.set_title(task.replace("$", r"\$"), fontsize=9)
            ax.tick_params(labelsize=7)
        left.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _draw(ax: Any, points: list[CostPoint], axis: str) -> None:
    """The points of one panel, a series a kind, against the attribute ``axis``."""
    kinds: dict[str, list[CostPoint]] = {}
    for p in points:
        kinds.setdefault(p.kind, []).append(p)
    for kind, members in kinds.items():
        colour, marker = STYLES.get(kind, ("tab:gray", "x"))
        xs = [getattr(p, axis) for p in members]
        ys = [p.score for p in members]
        errors = [
            [max(0.0, p.score - p.interval[0]) if p.interval else 0.0 for p in members],
            [max(0.0, p.interval[1] - p.score) if p.interval else 0.0 for p in members],
        ]
        ax.errorbar(xs, ys, yerr=errors, fmt=marker, color=colour, markersize=4, capsize=2, linewidth=1, label=kind)
        for x, y, p in zip(xs, ys, members):
            ax.annotate(
                _short(p.encoder).replace("$", r"\$"), (x, y), fontsize=5, xytext=(3, 3), textcoords="offset points"
            )


def _short(name: str, width: int = 32) -> str:
    """A name fit for a label beside a point: its middle elided when longer than ``width``."""
    return name if len(name) <= width else f"{name[: width // 2 - 1]}...{name[-(width // 2 - 2) :]}"
