"""Markdown leaderboard from stored results, with the papers' published numbers beside them.

Each section is a table of encoders x tasks (+ Avg. when a row has every column, as the papers
average). Measured rows come from ``results/<encoder>/<task>.json``; published rows from
``results/published/*.csv`` and are marked ``published`` with paper and table, so nobody mistakes
a number copied from a paper for one measured here.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from benchharness.results import Result, ResultStore

#: the papers' numbers, kept with the stored results of this checkout (see its README for sources)
PUBLISHED_DIR = Path(__file__).resolve().parent.parent / "results" / "published"


@dataclass(frozen=True)
class Column:
    header: str
    task: str
    metric: str | None = None  # None: the task's main score
    published: str | None = None  # column name in the published CSV


@dataclass(frozen=True)
class Section:
    title: str
    columns: tuple[Column, ...]
    published_csv: str | None
    average: bool = True


SECTIONS = (
    Section(
        "STS (Spearman x100; STS12-16 'all' aggregation)",
        tuple(Column(h, t, None, p) for h, t, p in (
            ("STS12", "STS12", "STS12"), ("STS13", "STS13", "STS13"), ("STS14", "STS14", "STS14"),
            ("STS15", "STS15", "STS15"), ("STS16", "STS16", "STS16"), ("STS-B", "STSBenchmark", "STSB"),
            ("SICK-R", "SICKRelatedness", "SICKR"))),
        "sts.csv",
    ),
    Section(
        "SentEval transfer (test accuracy %)",
        tuple(Column(t, t, None, t) for t in ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")),
        "transfer.csv",
    ),
    Section(
        "Retrieval and reranking (x100)",
        (Column("QQP MAP", "QQP", "map", "QQP_MAP"), Column("QQP MRR@10", "QQP", "mrr@10", "QQP_MRR10"),
         Column("AskUbuntu MAP", "AskUbuntu", "map", "AskUbuntu_MAP"),
         Column("AskUbuntu MRR@10", "AskUbuntu", "mrr@10", "AskUbuntu_MRR10")),
        "ranking.csv",
        average=False,
    ),
)


def _fmt(value: float | str | None) -> str:
    if value is None or value == "":
        return ""
    return f"{float(value):.2f}"


def _cell(result: Result | None, column: Column) -> float | None:
    if result is None:
        return None
    if column.metric is None:
        return result.main_score
    value = result.metrics.get(column.metric)
    return float(value) if value is not None else None


def source(results: list[Result]) -> str:
    """``measured``, naming the training recipe of a trained encoder (from its results' manifest):
    a trained row must say how to rebuild it, or that it cannot."""
    training = next((r.encoder_metadata["training"] for r in results if "training" in r.encoder_metadata), None)
    if training is None:
        # older results of a trained run kept only its folder, an absolute path of the machine
        local = any(str(r.encoder_identity.get("model", "")).startswith("/") for r in results)
        return "measured; trained, no recipe" if local else "measured"
    recipe = training.get("recipe")
    if recipe is None:
        return "measured; trained, no recipe"
    name = recipe.get("name") or f"recipe:{recipe['key']}"
    return f"measured; recipe {name} ({recipe['key']})"


def measured_rows(section: Section, results: list[Result]) -> list[list[str]]:
    by_encoder: dict[str, dict[str, Result]] = {}
    for r in results:
        by_encoder.setdefault(r.encoder, {})[r.task] = r
    rows = []
    for encoder in sorted(by_encoder):
        cells = [_cell(by_encoder[encoder].get(c.task), c) for c in section.columns]
        if all(v is None for v in cells):
            continue
        row = [encoder, source(list(by_encoder[encoder].values())), *(_fmt(v) for v in cells)]
        if section.average:
            row.append(_fmt(sum(cells) / len(cells)) if all(v is not None for v in cells) else "")
        rows.append(row)
    return rows


def published_rows(section: Section, published_dir: Path, papers: set[str] | None) -> list[list[str]]:
    if section.published_csv is None or not (published_dir / section.published_csv).exists():
        return []
    rows = []
    with open(published_dir / section.published_csv, newline="") as fh:
        for rec in csv.DictReader(fh):
            if papers is not None and rec["paper"] not in papers:
                continue
            cells = [_fmt(rec.get(c.published or "")) for c in section.columns]
            if not any(cells):
                continue
            row = [rec["model"], f"published: {rec['paper']} {rec['table']}", *cells]
            if section.average:
                row.append(_fmt(rec.get("Avg")))
            rows.append(row)
    return rows


def render(store: ResultStore, published_dir: Path, papers: set[str] | None = None) -> str:
    results = list(store)
    parts = ["# benchharness leaderboard", "",
             "Generated by `benchharness leaderboard` from the result files under `results/`. "
             "Rows marked *published* are copied from the method papers (`results/published/`, "
             "BERT/RoBERTa backbones) and were not measured here.", ""]
    for section in SECTIONS:
        measured = measured_rows(section, results)
        published = published_rows(section, published_dir, papers)
        if not measured and not published:
            continue
        headers = ["Encoder", "Source", *(c.header for c in section.columns)]
        if section.average:
            headers.append("Avg.")
        parts += [f"## {section.title}", "", tabulate(measured + published, headers=headers,
                                                      tablefmt="github", disable_numparse=True), ""]
        variants = sorted({f"{r.task}: {r.protocol.get('variant')}" for r in results
                           if r.task in {c.task for c in section.columns}})
        if variants:
            parts += ["Protocol variants measured: " + "; ".join(variants), ""]
    return "\n".join(parts)
