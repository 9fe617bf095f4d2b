"""AskUbuntu duplicate-question reranking (Lei et al. 2016 data, taolei87/askubuntu).

Files: ``text_tokenized.txt.gz`` (or the uncompressed ``.txt``): ``qid \\t title \\t body`` per
line; ``dev.txt``/``test.txt``: ``qid \\t similar ids \\t 20 candidate ids \\t 20 BM25 scores``,
candidates listed in BM25 order (the similar ids are a subset of the candidates).

Two protocols, each under its own name:

- ``AskUbuntu``: the useb / TSDAE evaluation (Wang et al. 2021), the one sentence-embedding papers
  report: test split, question titles only, queries without any similar candidate skipped (186
  of 200), candidates ranked by cosine with ties kept in BM25 order; MAP over the 20-list, MRR
  (no cutoff), MRR@10, P@1, P@5.
- ``AskUbuntu-mteb``: mteb's AskUbuntuDupQuestions: dev and test together, titles, queries
  without a positive *or* without a negative dropped (361). mteb 2 runs it as a reranking
  retrieval task: MAP is pytrec_eval's ``map_cut.1000`` (and MRR mteb's own), both of which order
  exactly tied scores by document id (the larger id, compared as strings, first); here ties keep
  BM25 order, the shared rule. The two agree (to mteb's rounding of MAP and P@k to 5 decimals)
  whenever no two candidates of a query get the very same cosine, and differ otherwise: with
  many exact ties (identical titles) MAP moves by more than 0.1 (x100). benchharness keeps BM25
  order, the order of the useb/TSDAE protocol (``tests/fidelity/test_mteb_crosscheck.py`` pins both).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.kinds import PAIRS
from benchharness.core.prompts import DOCUMENT, Role
from benchharness.core.task import BoardColumn, Embed, Evaluation, Metrics, Task, TaskMetadata, TaskProvider
from benchharness.data.readers import undecodable_message
from benchharness.scoring.graded import ndcg_at
from benchharness.scoring.ranking import means, per_query_metrics, ranked_relevance
from benchharness.scoring.views import as_view
from benchharness.tasks import boards

REFERENCE = "Lei et al. 2016 (taolei87/askubuntu); useb/TSDAE (Wang et al. 2021); mteb AskUbuntuDupQuestions"
TEXTS = ("askubuntu/text_tokenized.txt.gz", "askubuntu/text_tokenized.txt")


@dataclass(frozen=True)
class Query:
    qid: str
    similar: tuple[str, ...]
    candidates: tuple[str, ...]  # BM25 order
    bm25: tuple[float, ...]


def read_annotations(path: Path) -> list[Query]:
    """``dev.txt`` / ``test.txt``; checks the 20 candidates, their scores, similar within candidates."""
    queries = []
    with open(path, encoding="utf-8") as fh, _decoded(path, io.open):
        for lineno, line in enumerate(fh, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 4:
                raise DataError(
                    f"{path}:{lineno}: expected 4 tab-separated fields "
                    f"(qid, similar ids, candidate ids, BM25 scores), got {len(fields)}"
                )
            qid, similar, cands, scores = fields[0].strip(), fields[1].split(), fields[2].split(), fields[3].split()
            if len(cands) != len(scores):
                raise DataError(f"{path}:{lineno}: {len(cands)} candidates but {len(scores)} BM25 scores")
            if not set(similar) <= set(cands):
                raise DataError(
                    f"{path}:{lineno}: similar ids {sorted(set(similar) - set(cands))} are not among the candidates"
                )
            try:
                bm25 = tuple(float(s) for s in scores)
            except ValueError:
                raise DataError(f"{path}:{lineno}: BM25 scores must be numbers") from None
            queries.append(Query(qid, tuple(similar), tuple(cands), bm25))
    return queries


def read_texts(path: Path, wanted: set[str]) -> dict[str, tuple[str, str]]:
    """qid -> (title, body) for the ``wanted`` ids (the corpus has ~167k questions)."""
    opener = gzip.open if path.suffix == ".gz" else open
    texts: dict[str, tuple[str, str]] = {}
    lineno = 0
    with opener(path, "rt", encoding="utf-8") as fh, _decoded(path, opener):
        try:
            for lineno, line in enumerate(fh, 1):
                fields = line.rstrip("\n").split("\t")
                if len(fields) < 2 or not fields[0].strip():
                    raise DataError(f"{path}:{lineno}: expected 'qid<TAB>title<TAB>body'")
                qid = fields[0].strip()
                if qid in wanted:
                    texts[qid] = (fields[1].strip(), fields[2].strip() if len(fields) > 2 else "")
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:  # a truncated or damaged download
            raise DataError(f"{path}:{lineno + 1}: damaged or truncated compressed file ({exc})") from None
    missing = wanted - texts.keys()
    if missing:
        raise DataError(f"{path}: {len(missing)} annotated question ids have no text, e.g. {sorted(missing)[:5]}")
    return texts


@contextlib.contextmanager
def _decoded(path: Path, opener: Callable[..., IO[str]]) -> Iterator[None]:
    """Turn a ``UnicodeDecodeError`` raised while reading ``path`` into a DataError naming the line."""
    try:
        yield
    except UnicodeDecodeError as exc:
        with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as fh:
            raise DataError(undecodable_message(path, fh, exc)) from None


class AskUbuntu(Task):
    #: each query's candidates scored against it: by cosine, or by any kind's pair score
    takes = frozenset({PAIRS})

    def __init__(self, variant: str = "useb") -> None:
        super().__init__()
        if variant not in ("useb", "mteb"):
            raise InvalidInputError(f"unknown AskUbuntu variant {variant!r}")
        self.variant = variant
        useb = variant == "useb"
        self.metadata = TaskMetadata(
            name="AskUbuntu" if useb else "AskUbuntu-mteb",
            family="reranking",
            description="AskUbuntu duplicate questions: rerank 20 BM25 candidates by cosine of titles",
            split="test" if useb else "dev+test",
            main_score="map",
            protocol="useb-tsdae" if useb else "mteb-askubuntudupquestions",
            reference=REFERENCE,
            groups=("askubuntu",) if useb else (),
            n_samples=186 if useb else 361,
            board=boards.RANKING,
            board_columns=(
                BoardColumn("AskUbuntu MAP", "map", "AskUbuntu_MAP"),
                BoardColumn("AskUbuntu MRR@10", "mrr@10", "AskUbuntu_MRR10"),
            ),
            on_board=useb,
            protocol_details={
                "text": "question titles (tokenized file)",
                "similarity": "cosine (zero vector -> 0)",
                "splits": ["test"] if useb else ["dev", "test"],
                "queries": "with at least one similar candidate"
                if useb
                else "with at least one similar and one non-similar candidate",
                "ties": "equal cosine keeps BM25 (file) order",
                "map": "mean precision at each similar candidate's rank in the 20-list",
                "mrr": "first similar candidate, no cutoff; mrr@10 also",
                "ndcg": "nDCG@10 of the 20-list, gain 1 for a similar candidate (as sentence-transformers' "
                "CrossEncoderRerankingEvaluator reports it)",
            },
        )

    def _load(self, data: DataRoot) -> None:
        splits = ["test"] if self.variant == "useb" else ["dev", "test"]
        queries = [q for s in splits for q in read_annotations(self._path(data, f"askubuntu/{s}.txt", "askubuntu"))]
        if self.variant == "useb":
            self.queries = [q for q in queries if q.similar]
        else:
            self.queries = [q for q in queries if q.similar and len(set(q.candidates) - set(q.similar)) > 0]
        if len(self.queries) != self.metadata.n_samples:
            raise DataError(
                f"{self.name}: {len(self.queries)} scored queries in {splits}, expected "
                f"{self.metadata.n_samples}; the annotation files are not taolei87/askubuntu's"
            )
        rel = next((r for r in TEXTS if (data.root / r).exists()), TEXTS[0])
        wanted = {i for q in self.queries for i in (q.qid, *q.candidates)}
        texts = read_texts(self._path(data, rel, "askubuntu"), wanted)
        self.titles = {qid: title for qid, (title, _) in texts.items()}

    def sentences(self) -> list[str]:
        return [self.titles[i] for q in self.queries for i in (q.qid, *q.candidates)]

    def requests(self) -> dict[Role, list[str]]:
        """Each question's title as a query, its candidates' as documents (mteb's reranking roles)."""
        return {
            self.query_role: [self.titles[q.qid] for q in self.queries],
            DOCUMENT: [self.titles[c] for q in self.queries for c in q.candidates],
        }

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics and, per query, the AP, RR, RR@10, P@1, P@5 and nDCG@10 they average."""
        left = [self.titles[q.qid] for q in self.queries for _ in q.candidates]
        right = [self.titles[c] for q in self.queries for c in q.candidates]
        scores = as_view(embed).pairs(left, right, (self.query_role, DOCUMENT))
        rankings, start = [], 0
        for q in self.queries:
            block = scores[start : start + len(q.candidates)]
            start += len(q.candidates)
            rankings.append(ranked_relevance(block, np.array([c in q.similar for c in q.candidates])))
        per_query = per_query_metrics(rankings, ks_mrr=(10,), ks_p=(1, 5))
        per_query["ndcg@10"] = np.array(
            [ndcg_at(r, np.ones(len(q.similar)), 10) for r, q in zip(rankings, self.queries)]
        )
        metrics: Metrics = {**means(per_query)}
        metrics["n_queries"] = len(rankings)
        return Evaluation(metrics, per_query, "ranking")


TASKS = TaskProvider(
    tasks={"AskUbuntu": lambda: AskUbuntu("useb"), "AskUbuntu-mteb": lambda: AskUbuntu("mteb")},
    groups={"askubuntu": ["AskUbuntu"]},
    order=40,
)
