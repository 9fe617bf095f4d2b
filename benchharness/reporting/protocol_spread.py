"""Why papers disagree: one encoder's score under every protocol variant the literature reports.

For each task the table puts the harness's default beside the variants other papers and tools use,
all from stored results (nothing is encoded here):

- STS12-16: ``all`` (one Spearman over all subsets: SimCSE, SBERT, ConSERT, PaSeR, DefSent+ and
  mteb's merged sets), ``mean`` and ``wmean`` (the original SentEval), from the stored metrics;
- STS-B: SentEval's tokenized, lowercased copy against the raw cased text mteb uses
  (``STSBenchmark-raw``);
- SICK-R: the 4,927 test pairs against mteb's 9,927 (``SICKRelatedness-mteb``);
- every STS task: cosines in float64 (here) against float32 (mteb). The float32 score is the
  Spearman of the stored float64 cosines rounded to float32, which matches mteb's to 1e-4
  (docs/PROTOCOLS.md); it moves where float32 ties pairs that are not tied;
- transfer: SentEval's default classifier configuration against ``fast`` (``MR-fast``, ...).

A variant without a stored result is listed with the command that stores it. ``PAPERS`` says which
variant each paper of ``benchharness/reporting/published/`` reports, so a reader sees how much of
a claimed gain is protocol.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchharness.core.results import Result, ResultStore
from benchharness.reporting.escape import md_cell, md_code, one_line

STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
TRANSFER = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")

#: the variant each paper of benchharness/reporting/published/ reports, and where that is said
PAPERS = {
    "consert": "STS12-16 all (stated: Spearman once over the merged subsets), SentEval text, SICK-R test",
    "paser": "STS12-16 all (docs/PROTOCOLS.md), SentEval text, SICK-R test; transfer default",
    "defsent_plus": "STS12-16 all (docs/PROTOCOLS.md), SentEval text, SICK-R test; transfer default (stated)",
    "repal": "STS12-16 all, following SimCSE and ConSERT (not stated in the paper), SICK-R test",
}


@dataclass
class Variant:
    task: str
    variant: str
    score: float | None
    default: bool = False
    missing: str = ""  # the command that stores it, when it is not stored


def _float32_score(store: ResultStore, result: Result) -> float | None:
    """Spearman x100 of the result's stored cosines rounded to float32 (the ``all`` aggregation)."""
    if not store.has_items(result) or not result.main_metric.endswith("spearman"):
        return None
    import numpy as np
    from scipy.stats import spearmanr

    items = store.load_items(result).items
    if "cosine" not in items:
        return None
    return float(100 * spearmanr(np.asarray(items["cosine"]).astype(np.float32), items["gold"])[0])


def spread(store: ResultStore, encoder: str) -> list[Variant]:
    """Every variant of every task for ``encoder`` (stored or with the command that stores it)."""
    stored = {r.task: r for r in store if r.encoder == encoder}

    def stored_or_missing(
        task: str, label: str, key: str | None = None, default: bool = False, shown_as: str | None = None
    ) -> Variant:
        """The variant stored as ``task`` (a metric ``key`` of it, else its main score), shown under
        ``shown_as`` (the task it is a variant of), or the command that stores it."""
        result = stored.get(task)
        if result is None:
            return Variant(shown_as or task, label, None, default, store.run_command(encoder, task))
        score = result.main_score if key is None else result.metrics.get(key)
        return Variant(shown_as or task, label, None if score is None else float(score), default)

    out: list[Variant] = []
    for year in STS_YEARS:
        out.append(stored_or_missing(year, "all", None, True))
        out.append(stored_or_missing(year, "mean", "mean.spearman"))
        out.append(stored_or_missing(year, "wmean", "wmean.spearman"))
        if year in stored:
            out.append(Variant(year, "all, float32 cosines", _float32_score(store, stored[year])))
    for task, default_label, other, other_label in (
        ("STSBenchmark", "SentEval tokenized text", "STSBenchmark-raw", "raw cased text (mteb)"),
        ("SICKRelatedness", "test, 4,927 pairs", "SICKRelatedness-mteb", "all 9,927 pairs (mteb)"),
    ):
        out.append(stored_or_missing(task, default_label, None, True))
        if task in stored:
            out.append(Variant(task, "float32 cosines (mteb)", _float32_score(store, stored[task])))
        out.append(stored_or_missing(other, other_label, shown_as=task))
    for task in TRANSFER:
        out.append(stored_or_missing(task, "SentEval default config", None, True))
        out.append(stored_or_missing(f"{task}-fast", "fast config", shown_as=task))
    return out


def delta_text(d: float) -> str:
    """Two decimals, or four where two would print a move as 0.00 (float32 ties move by 1e-4)."""
    return "0" if d == 0 else f"{d:+.2f}" if abs(d) >= 0.005 else f"{d:+.4f}"


def markdown(encoder: str, variants: list[Variant]) -> str:
    """The table, per task: each variant's score and its distance from the harness's default, then
    the largest spread; and which variant each published paper reports."""
    from tabulate import tabulate

    rows, default = [], None
    spreads: dict[str, list[float]] = {}
    for v in variants:
        if v.default:
            default = v.score
        delta = "" if v.default or v.score is None or default is None else delta_text(v.score - default)
        score = f"{v.score:.2f}" if v.score is not None else f"not stored: {md_code(v.missing)}" if v.missing else "n/a"
        rows.append([md_cell(c) for c in (v.task, v.variant + (" (default)" if v.default else ""), score, delta)])
        if v.score is not None:
            spreads.setdefault(v.task, []).append(v.score)
    widest = max(spreads.items(), key=lambda kv: max(kv[1]) - min(kv[1]), default=None)
    parts = [
        f"# Protocol spread: {one_line(encoder)}",
        "",
        tabulate(rows, headers=["task", "variant", "score", "vs default"], tablefmt="github", disable_numparse=True),
        "",
    ]
    if widest is not None:
        parts += [f"Largest spread: {widest[0]}, {max(widest[1]) - min(widest[1]):.2f} points between variants.", ""]
    parts += [
        "Variants the published rows (`benchharness/reporting/published/`) report:",
        "",
        *(f"- {paper}: {text}" for paper, text in PAPERS.items()),
        "",
    ]
    return "\n".join(parts)
