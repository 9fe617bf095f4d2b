"""The ``pairs`` kind of task from files: sentence pairs with gold scores, scored by the STS protocol
of ``tasks.sts`` (cosine, a zero vector scoring 0; Pearson and Spearman; main score ``spearman``, as
STS-B's), each pair as the file holds it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError
from benchharness.data.readers import excerpt, finite_float
from benchharness.tasks import sts
from benchharness.tasks.files.base import GROUP, TEXT, Declaration, FileTask, Row, sentence

#: the protocol variant; the leaderboard finds file tasks by their ``file-`` prefix
PAIRS_PROTOCOL = "file-pairs-cosine"


@dataclass(frozen=True)
class Pairs:
    a: list[str]
    b: list[str]
    gold: list[float]

    @property
    def n(self) -> int:
        return len(self.gold)


def _score(path: Path, line: int, value: Any, column: str, score_range: tuple[float, float] | None) -> float:
    score = finite_float(value)
    if score is None:
        raise DataError(f"{path}:{line}: score {excerpt(value)} in {column!r} is not a number")
    if score_range is not None and not score_range[0] <= score <= score_range[1]:
        raise DataError(
            f"{path}:{line}: score {score:g} in {column!r} is outside score_range "
            f"[{score_range[0]:g}, {score_range[1]:g}]"
        )
    return score


class FilePairTask(FileTask, sts.PairTask):
    """Scored pairs, under the STS protocol of ``tasks.sts`` with STS-B's metrics."""

    #: STS-B's metrics: Pearson and Spearman over the one set of pairs, and their number
    _metrics = sts.CsvPairTask._metrics

    def __init__(self, decl: Declaration) -> None:
        super().__init__()
        self.decl = decl
        # the family's metadata (similarity, main score as STS-B's); the file completes it
        self.metadata = sts._pair_meta(
            decl.name,
            f"sentence pairs with gold scores from {decl.path}, unsupervised cosine",
            "all",
            0,
            (GROUP,),
            protocol=PAIRS_PROTOCOL,
            text=TEXT,
        )

    def _read(self, rows: list[Row]) -> Pairs:
        path, cols = self.decl.path, self.decl.columns
        if len(rows) < 2:
            raise DataError(f"{path}: {len(rows)} pair(s); a correlation needs at least 2")
        s1, s2, score = cols["sentence1"], cols["sentence2"], cols["score"]
        pairs = Pairs([], [], [])
        for line, rec in rows:  # row by row: the first problem in the file is the one reported
            pairs.a.append(sentence(path, line, rec[s1], s1))
            pairs.b.append(sentence(path, line, rec[s2], s2))
            pairs.gold.append(_score(path, line, rec[score], score, self.decl.score_range))
        return pairs

    def _use(self, content: Pairs) -> None:
        self.subsets = {"test": (content.a, content.b, np.asarray(content.gold))}

    def _details(self, content: Pairs) -> dict[str, Any]:
        rng = self.decl.score_range
        return {"score_range": None if rng is None else list(rng)}
