"""``benchharness analyze A B ...``: the geometry of encoders' spaces on STS-B test, stored and plotted.

Numbers (``benchharness.reporting.analysis``): alignment and uniformity (Wang & Isola, as SimCSE reports
them: positives are the STS-B pairs with gold >= 4, uniformity over all STS-B sentences), the
mean/variance of the pair cosine per gold level (PaSeR's table), and isotropy (the mean cosine of
random sentence pairs; the variance share of the top 1 and 10 principal components). They are
written to ``<out>/<encoder>.json``, and the figures, every encoder in each, to
``<out>/alignment-uniformity.<fmt>`` (one point per encoder, as SimCSE's Fig. 2) and
``<out>/cosine-levels.<fmt>`` (the cosine densities per gold level, a column per encoder), as PNG,
SVG and PDF. When some of the encoders are sizes of another (``minilm-l6+truncate(d=64|128)`` beside
``minilm-l6``: truncated or quantized variants), ``<out>/size-curve.<fmt>`` draws each one's STS-B
test Spearman correlation, with its 95% bootstrap interval, against the bytes one vector takes.
Given cost points of stored results (``reporting.cost_curve``: the tasks where a named sparse or
multi-vector model has a search result, dense ones beside it), ``<out>/cost.json`` holds them with
their units and ``<out>/cost.<fmt>`` draws each task's scores against bytes per document and
against operations per query-document pair. Nothing is written outside ``out``.

The encoder comes from the resolver, wrapped by the embedding cache, like ``run``, so a second
analysis of the same encoder encodes nothing. The pairs are those of the ``STSBenchmark`` task
(SentEval's text), handed in by the CLI, which is the composition root.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.atomic import write_json
from benchharness.core.encoder import Encoder
from benchharness.core.provenance import now, versions
from benchharness.core.results import slug
from benchharness.evaluation.run_settings import DEFAULT_SEED
from benchharness.reporting import analysis
from benchharness.reporting.cost_curve import UNITS, CostPoint, cost_figure
from benchharness.reporting.size_curve import SizePoint, group_sizes, size_figure
from benchharness.scoring.confidence import RESAMPLES
from benchharness.scoring.metrics import paired_cosine
from benchharness.scoring.stats import bootstrap_spearman
from benchharness.scoring.stats.bootstrap import DEFAULT_LEVEL, derive_seed

RANDOM_PAIRS = 100_000
SEED = 0
TASK = "STSBenchmark"


def analyze(
    encoder: Encoder, name: str, first: list[str], second: list[str], gold: np.ndarray
) -> tuple[dict[str, Any], np.ndarray]:
    """The analysis of ``encoder`` on the given scored pairs, and the pairs' cosines."""
    sentences = list(dict.fromkeys([*first, *second]))
    vectors = encoder.encode(sentences)
    row = {s: i for i, s in enumerate(sentences)}
    a = vectors[[row[s] for s in first]]
    b = vectors[[row[s] for s in second]]
    cosine = paired_cosine(a, b)
    positives = analysis.positive_pairs(gold)
    levels = analysis.cosine_by_gold_level(cosine, gold)
    k_top = min(10, *vectors.shape)
    # seeded as a run with the default seed seeds the task's interval: both give the same interval
    spearman = bootstrap_spearman(cosine, gold, n_resamples=RESAMPLES, seed=derive_seed(DEFAULT_SEED, TASK))
    interval = spearman.interval(DEFAULT_LEVEL)
    report = {
        "encoder": name,
        "data": {
            "task": TASK,
            "pairs": len(gold),
            "sentences": len(sentences),
            "positive_pairs": len(positives),
            "positive_threshold": analysis.SIMCSE_POSITIVE_THRESHOLD,
        },
        "spearman": {
            "score": spearman.estimate,
            "ci": [round(interval.low, 4), round(interval.high, 4)],
            "level": DEFAULT_LEVEL,
            "resamples": RESAMPLES,
        },
        "size": {"dimensions": int(vectors.shape[1]), "bytes_per_vector": encoder.bytes_per_vector(vectors.shape[1])},
        "alignment": analysis.alignment(a[positives], b[positives]),
        "uniformity": analysis.uniformity(vectors),
        "cosine_by_gold_level": [asdict(lv) for lv in levels],
        "isotropy": {
            "mean_random_pair_cosine": analysis.mean_random_pair_cosine(vectors, RANDOM_PAIRS, SEED),
            "random_pairs": RANDOM_PAIRS,
            "seed": SEED,
            "top1_pc_variance_share": analysis.top_pc_variance_share(vectors, 1),
            f"top{k_top}_pc_variance_share": analysis.top_pc_variance_share(vectors, k_top),
        },
        "encoder_identity": {"hash": encoder.identity, **encoder.identity_record()},
        "versions": versions(),
        "date": now(),
    }
    return report, cosine


def write(
    reports: list[tuple[dict[str, Any], np.ndarray]],
    gold: np.ndarray | None,
    out: Path,
    formats: tuple[str, ...] = analysis.FIGURE_FORMATS,
    costs: dict[str, list[CostPoint]] | None = None,
) -> list[Path]:
    """Each report as ``<out>/<encoder>.json``, and the two figures of all encoders in each format
    (three where some encoders are sizes of another: the size curve; none when ``gold`` is None, no
    encoder named having one vector a sentence); given ``costs`` (by task), also ``cost.json`` and
    the cost figure."""
    written = []
    for report, _ in reports:
        path = out / f"{slug(report['encoder'])}.json"
        write_json(path, report)
        written.append(path)
    if costs:
        path = out / "cost.json"
        write_json(path, {"units": UNITS, "tasks": {task: [p.as_dict() for p in ps] for task, ps in costs.items()}})
        written.append(path)
    points = {r["encoder"]: (r["alignment"], r["uniformity"]) for r, _ in reports}
    cosines = {r["encoder"]: cosine for r, cosine in reports}
    sizes = group_sizes(
        SizePoint(
            r["encoder"],
            f"{TASK} (test)",
            "spearman",
            r["spearman"]["score"],
            (r["spearman"]["ci"][0], r["spearman"]["ci"][1]),
            r["size"]["bytes_per_vector"],
        )
        for r, _ in reports
    )
    for fmt in formats:
        if sizes:
            written.append(analysis.save_figure(size_figure(sizes), out / f"size-curve.{fmt}"))
        if costs:
            written.append(analysis.save_figure(cost_figure(costs), out / f"cost.{fmt}"))
        if gold is not None:
            written.append(analysis.plot_alignment_uniformity(points, out / f"alignment-uniformity.{fmt}"))
            written.append(
                analysis.plot_cosine_levels(
                    cosines, gold, out / f"cosine-levels.{fmt}", title="STS-B test: cosine per gold level"
                )
            )
    return written
