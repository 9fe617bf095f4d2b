"""Unsupervised semantic textual similarity: STS12-16, STS-B and SICK-R by cosine.

Protocol (docs/PROTOCOLS.md, SentEval/SimCSE): read SentEval's files, drop pairs whose gold line is
empty, hand the encoder ``' '.join(line.split())`` (SentEval re-joins the whitespace tokens), score
pairs by cosine (a zero vector scores 0), and correlate with the gold scores. STS12-16 record the
three aggregations in use: ``all`` (one Spearman over the concatenated subsets: SimCSE, SBERT,
ConSERT, PaSeR, DefSent report this; equal to mteb's merged sets), ``mean`` (unweighted mean of
per-subset correlations, original SentEval) and ``wmean`` (mean weighted by subset size).

Against mteb's STS evaluation (``tests/fidelity/test_mteb_crosscheck.py`` pins each point):

- Precision. mteb computes cosines in float32 (sklearn's ``paired_cosine_distances`` on float32
  vectors), so identical vectors score exactly 1 and near-equal cosines collapse into ties that
  Spearman averages; here cosines are float64, where a pair holding the same sentence twice scores
  1 +- a few ulp and rounding noise orders pairs that are mathematically tied. Without such pairs
  the two agree to 1e-4 (x100): STS-B, STS-B raw, SICK-R on pseudo-random vectors. With them they
  do not: STS12 (79 pairs repeat a sentence) differs by about 2e-3 on pseudo-random vectors and
  3e-3 on GloVe averages, STS-B raw by about 3e-2 on GloVe averages (whose out-of-vocabulary and
  word-order-free averages give many pairs identical vectors). Spearman of these float64 cosines
  rounded to float32 equals mteb's to 1e-4 in every case. benchharness keeps float64, SentEval's
  precision (its stored scores and the papers' tables were computed that way).
- A zero vector. SentEval (and this module) scores the pair 0; mteb scores it 0.5 (sklearn
  normalises a zero row to zero and ``1 - ||0 - b/|b|||^2 / 2 = 0.5``). Only an encoder that can
  return a zero vector (GloVe on an all-unknown sentence) is affected.
- Aggregation and text: ``all`` is mteb's merged-subset score; STS12-16's text is SentEval's copy,
  which equals mteb's (``mteb_bridge.export.EXPORTABLE`` lists the evidence per task).
"""

from __future__ import annotations

from abc import abstractmethod
from functools import partial

import numpy as np

from benchharness.core import kinds
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.task import (
    BoardColumn,
    Embed,
    Evaluation,
    Metrics,
    Task,
    TaskMetadata,
    TaskProvider,
)
from benchharness.data.readers import (
    SICK_COLUMNS,
    STS_YEARS,
    STSB_COLUMNS,
    raw_text,
    read_scored_tsv,
    read_sts_pairs,
    senteval_text,
    sick_file,
    sts_year_file,
    stsb_file,
)
from benchharness.scoring.metrics import constant_value, correlations
from benchharness.scoring.views import as_view
from benchharness.tasks import boards

PROTOCOL = "senteval-unsup-cosine"
#: scored pairs per year, from the task papers (and docs/PROTOCOLS.md)
PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
REFERENCE = "SentEval (Conneau & Kiela 2018); SimCSE evaluation (Gao et al. 2021)"


class PairTask(Task):
    """Pairs with gold scores, possibly in named subsets; evaluation by cosine, or by the pair score
    of a model of another kind (a cross-encoder's, as ``CrossEncoderCorrelationEvaluator`` scores)."""

    subsets: dict[str, tuple[list[str], list[str], np.ndarray]]
    takes = frozenset({kinds.PAIRS})

    def load(self, data: DataRoot) -> None:
        """Read the files, then refuse a subset whose gold scores are all one value: no correlation
        with a constant exists, so the task fails here, before any sentence is encoded, naming the file
        (and not later as NaN scores, warnings and a result that cannot be stored)."""
        super().load(data)
        for name, (_, _, gold) in self.subsets.items():
            value = constant_value(gold)
            if value is not None:
                raise DataError(
                    f"gold scores are all {value} in {self._gold_file(name)}: "
                    "a correlation with a constant is undefined"
                )

    def _gold_file(self, subset: str) -> str:
        """The file(s) holding ``subset``'s gold scores, for messages (by default every file read)."""
        return ", ".join(map(str, self.files))

    def sentences(self) -> list[str]:
        return [s for a, b, _ in self.subsets.values() for s in (*a, *b)]

    @abstractmethod
    def _metrics(self, scores: dict[str, tuple[np.ndarray, np.ndarray]]) -> Metrics:
        """The task's metrics from each subset's (cosine, gold)."""

    def _check_count(self) -> None:
        n = sum(len(g) for _, _, g in self.subsets.values())
        if self.metadata.n_samples is not None and n != self.metadata.n_samples:
            raise DataError(
                f"{self.name}: read {n} scored pairs from {', '.join(map(str, self.files[:2]))}..., "
                f"expected {self.metadata.n_samples}; the files are not SentEval's"
            )

    def _scores(self, embed: Embed) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        view = as_view(embed)
        return {name: (view.pairs(a, b), gold) for name, (a, b, gold) in self.subsets.items()}

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """The metrics and, per pair in the task's order (subsets concatenated), the cosine (float64,
        as scored: float32 could tie pairs that are not tied and move Spearman), gold and subset."""
        scores = self._scores(embed)
        for name, (pred, _) in scores.items():
            value = constant_value(pred)
            if value is not None:
                where = self.name if len(scores) == 1 else f"{self.name} ({name})"
                raise InvalidInputError(
                    f"the {'cosines' if as_view(embed).kind == kinds.DENSE else 'pair scores'} are all {value:.6g} on "
                    f"{where}: the encoder scores every pair alike (the same vector for every sentence?); a "
                    "correlation with a constant is undefined"
                )
        items = {
            "cosine": np.concatenate([p for p, _ in scores.values()]),
            "gold": np.concatenate([np.asarray(g, dtype=np.float64) for _, g in scores.values()]),
            "subset": np.concatenate([np.full(len(g), i, dtype=np.int16) for i, (_, g) in enumerate(scores.values())]),
            "subset_names": np.array(list(scores)),
        }
        return Evaluation(self._metrics(scores), items, "sts")


class STSYear(PairTask):
    """One STS shared-task year with its subsets."""

    def __init__(self, year: str) -> None:
        super().__init__()
        self.year = year
        self.metadata = TaskMetadata(
            name=year,
            family="sts",
            description=f"SemEval {year} English STS, all subsets, unsupervised cosine",
            split="test",
            main_score="all.spearman",
            protocol=PROTOCOL,
            reference=REFERENCE,
            groups=("sts",),
            n_samples=PAIRS[year],
            board=boards.STS,
            board_columns=(BoardColumn(published=year),),
            protocol_details={
                "similarity": "cosine (zero vector -> 0)",
                "text": "SentEval tokenized+lowercased, whitespace re-joined",
                "aggregations": ["all", "mean", "wmean"],
                "main": "Spearman over the concatenation of all subsets ('all')",
                "subsets": list(STS_YEARS[year]),
            },
        )

    def _load(self, data: DataRoot) -> None:
        self.subsets = {}
        for subset in STS_YEARS[self.year]:
            in_path = self._path(data, sts_year_file(self.year, subset, "input"), "senteval")
            gs_path = self._path(data, sts_year_file(self.year, subset, "gs"), "senteval")
            a, b, g = read_sts_pairs(in_path, gs_path)
            self.subsets[subset] = (a, b, np.asarray(g))
        self._check_count()

    def _gold_file(self, subset: str) -> str:
        return next(str(f) for f in self.files if f.name == f"STS.gs.{subset}.txt")

    def _metrics(self, scores: dict[str, tuple[np.ndarray, np.ndarray]]) -> Metrics:
        metrics: Metrics = {}
        sizes = {}
        for name, (pred, gold) in scores.items():
            for key, value in correlations(pred, gold).items():
                metrics[f"{name}.{key}"] = value
            metrics[f"{name}.n"] = sizes[name] = len(gold)
        all_pred = np.concatenate([p for p, _ in scores.values()])
        all_gold = np.concatenate([g for _, g in scores.values()])
        for key, value in correlations(all_pred, all_gold).items():
            metrics[f"all.{key}"] = value
        weights = np.array([sizes[n] for n in scores], dtype=float)
        for key in ("pearson", "spearman"):
            per = np.array([metrics[f"{n}.{key}"] for n in scores])
            metrics[f"mean.{key}"] = float(per.mean())
            metrics[f"wmean.{key}"] = float((per * weights).sum() / weights.sum())
        metrics["n"] = int(weights.sum())
        return metrics


class CsvPairTask(PairTask):
    """STS-B (SentEval's tokenized csv, or the raw original) and SICK-R: the pairs of one file, or
    of several concatenated in order (mteb's SICK-R scores train, trial and test as one set)."""

    def __init__(
        self, metadata: TaskMetadata, rels: tuple[str, ...], cols: tuple[int, int, int], header: bool, raw: bool = False
    ) -> None:
        super().__init__()
        self.metadata = metadata
        self.rels = rels
        self.cols = cols  # (gold, sentence a, sentence b) column indices
        self.header = header
        self.raw = raw

    def _load(self, data: DataRoot) -> None:
        a: list[str] = []
        b: list[str] = []
        g: list[float] = []
        for rel in self.rels:
            first, second, gold = read_scored_tsv(
                self._path(data, rel, "senteval"), self.cols, self.header, text=raw_text if self.raw else senteval_text
            )
            a.extend(first)
            b.extend(second)
            g.extend(gold)
        self.subsets = {"test": (a, b, np.asarray(g))}
        self._check_count()

    def _metrics(self, scores: dict[str, tuple[np.ndarray, np.ndarray]]) -> Metrics:
        pred, gold = scores["test"]
        return {**correlations(pred, gold), "n": len(gold)}


def _pair_meta(
    name: str,
    description: str,
    split: str,
    n: int,
    groups: tuple[str, ...],
    protocol: str = PROTOCOL,
    text: str = "SentEval tokenized, whitespace re-joined",
    column: BoardColumn | None = None,
) -> TaskMetadata:
    """A pair set's metadata; ``column``: its column of the STS table, None: a variant not on the board."""
    return TaskMetadata(
        name=name,
        family="sts",
        description=description,
        split=split,
        main_score="spearman",
        protocol=protocol,
        reference=REFERENCE,
        groups=groups,
        n_samples=n,
        protocol_details={"similarity": "cosine (zero vector -> 0)", "text": text},
        board=boards.STS,
        board_columns=(column,) if column else (),
        on_board=column is not None,
    )


def stsb(split: str = "test", raw: bool = False) -> CsvPairTask:
    n = {"train": 5749, "dev": 1500, "test": 1379}[split]
    name = "STSBenchmark" + ("" if split == "test" else f"-{split}") + ("-raw" if raw else "")
    desc = f"STS Benchmark {split} split, unsupervised cosine" + (" on the original cased text" if raw else "")
    groups = ("sts",) if split == "test" and not raw else ()
    meta = _pair_meta(
        name,
        desc,
        split,
        n,
        groups,
        protocol=PROTOCOL + ("-rawtext" if raw else ""),
        text="original cased text (mteb-style)" if raw else "SentEval tokenized+lowercased",
        column=BoardColumn("STS-B", published="STSB") if groups else None,
    )
    return CsvPairTask(meta, (stsb_file(split, raw),), STSB_COLUMNS, header=False, raw=raw)


def sick(split: str = "test") -> CsvPairTask:
    n = {"test": 4927, "trial": 500, "train": 4500}[split]
    name = "SICKRelatedness" + ("" if split == "test" else f"-{split}")
    meta = _pair_meta(
        name,
        f"SICK relatedness {split} split (relatedness_score), unsupervised cosine",
        split,
        n,
        ("sts",) if split == "test" else (),
        column=BoardColumn("SICK-R", published="SICKR") if split == "test" else None,
    )
    return CsvPairTask(meta, (sick_file(split),), SICK_COLUMNS, header=True)


#: SICK's SemEval-2014 splits in mteb's SICK-R: 4,500 train + 500 trial + 4,927 test pairs
SICK_MTEB_SPLITS = ("train", "trial", "test")


def sick_mteb() -> CsvPairTask:
    """``SICKRelatedness-mteb``: mteb's SICK-R pair set, all 9,927 pairs of the three SemEval-2014
    files scored as one set (mteb's ``mteb/sickr-sts`` has one 'test' split holding all of them).

    Checked against mteb's descriptive statistics of SICK-R: the same number of pairs (9,927), of
    distinct pairs (9,842) and the same gold scores (minimum, maximum and mean equal). The text is
    *not* byte-identical: mteb's sentences total 676 (first side) and 647 (second side) characters
    fewer than SICK's files, with 4 and 5 fewer distinct sentences (SentEval's whitespace re-join
    changes nothing in SICK, so the difference is in mteb's copy of the text). Hence this variant is
    not exported as mteb's SICK-R (``mteb_bridge.export.NOT_EXPORTED``): scores are close to mteb's
    but not guaranteed equal; ``benchharness run --tasks mteb:SICK-R`` runs mteb's own data.
    """
    meta = _pair_meta(
        "SICKRelatedness-mteb",
        "SICK relatedness, train+trial+test pairs as mteb's SICK-R, unsupervised cosine",
        "train+trial+test",
        9927,
        (),
    )
    return CsvPairTask(meta, tuple(sick_file(s) for s in SICK_MTEB_SPLITS), SICK_COLUMNS, header=True)


TASKS = TaskProvider(
    tasks={
        **{year: partial(STSYear, year) for year in STS_YEARS},
        "STSBenchmark": lambda: stsb("test"),
        "SICKRelatedness": lambda: sick("test"),
        "STSBenchmark-dev": lambda: stsb("dev"),
        "STSBenchmark-raw": lambda: stsb("test", raw=True),
        "SICKRelatedness-trial": lambda: sick("trial"),
        "SICKRelatedness-mteb": sick_mteb,
    },
    groups={"sts": ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]},
    # the leaderboard's column headers and the published tables' keys
    aliases={"STS-B": "STSBenchmark", "STSB": "STSBenchmark", "SICK-R": "SICKRelatedness", "SICKR": "SICKRelatedness"},
    order=10,
)
