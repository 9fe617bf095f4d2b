"""A TREC run file: each query's ranked documents, one line per (query, document)::

    query-id  Q0  document-id  rank  score  tag

separated by whitespace (trec_eval's format; the second field and the tag are not read). A query's
documents are ordered by score, descending, ties by the rank written (trec_eval orders ties by
document id; the file's own rank keeps the order its author meant). A problem is a ``DataError``
naming the file and line: a line of another number of fields, a rank that is not a whole number, a
score that is not a finite number, a document listed twice for one query, an empty file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchharness.core.data_root import DataError
from benchharness.data.readers import excerpt, finite_float, numbered_lines, text_stream

FIELDS = ("query-id", "Q0", "document-id", "rank", "score", "tag")


@dataclass(frozen=True)
class RunList:
    """One query's documents, best first, with their scores."""

    documents: list[str]
    scores: list[float]


def read_trec_run(path: Path) -> dict[str, RunList]:
    """Each query id's list, in the order of the file's first line for that query."""
    found: dict[str, dict[str, tuple[float, int, int]]] = {}  # query -> document -> (score, rank, line)
    with text_stream(path) as fh:
        for line, text in numbered_lines(fh, path):
            fields = text.split()
            if not fields:
                continue
            if len(fields) != len(FIELDS):
                raise DataError(
                    f"{path}:{line}: {len(fields)} field(s); a TREC run line has {len(FIELDS)}: {' '.join(FIELDS)}"
                )
            query, _, document, rank_text, score_text, _ = fields
            try:
                rank = int(rank_text)
            except ValueError:
                raise DataError(f"{path}:{line}: rank {excerpt(rank_text)} is not a whole number") from None
            score = finite_float(score_text)
            if score is None:
                raise DataError(f"{path}:{line}: score {excerpt(score_text)} is not a finite number")
            listed = found.setdefault(query, {})
            if document in listed:
                raise DataError(
                    f"{path}:{line}: query {excerpt(query)} lists document {excerpt(document)} again "
                    f"(first on line {listed[document][2]})"
                )
            listed[document] = (score, rank, line)
    if not found:
        raise DataError(f"{path}: no run lines; expected lines of {' '.join(FIELDS)}")
    runs = {}
    for query, listed in found.items():
        order = sorted(listed, key=lambda d: (-listed[d][0], listed[d][1]))
        runs[query] = RunList(order, [listed[d][0] for d in order])
    return runs
