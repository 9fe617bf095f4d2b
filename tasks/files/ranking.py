"""The asymmetric kinds of tasks declared from files (``benchharness.tasks.files.declarations``): retrieval
from a BEIR folder and reranking from a JSON lines file, each scored as BEIR/mteb score it.

- ``retrieval``: a BEIR folder (``benchharness.tasks.files.beir``). Queries are encoded in the task's
  query role (with its instruction, if declared), the corpus in the document role; each query's
  100 nearest documents by cosine are found exactly, one block of the corpus at a time
  (``benchharness.scoring.top_k``, as QQP: memory holds the queries, one block and the lists),
  and scored by pytrec_eval's definitions with graded relevance (``benchharness.scoring.graded``):
  nDCG@10 (main), MAP@100, MRR@10, recall@100. Ties: score descending, then corpus order (the
  order of ``corpus.jsonl``; pytrec_eval orders tied scores by document id, descending, so the two
  differ only where exactly tied documents straddle a relevant one). The query's own id is not
  excluded from its results (mteb's default; BEIR's ``ignore_identical_ids`` is not applied).
- ``reranking``: one JSON object a line, ``{"query": ..., "positive": [...], "negative": [...]}``
  (mteb's reranking format). Each line's candidates (its positives and negatives) are ranked by
  cosine with its query; MAP (the mean over lines of the average precision over that whole
  ranking) and MRR@10, as mteb's ``RerankingEvaluator``, and nDCG@10 (binary gains), as
  sentence-transformers' ``CrossEncoderRerankingEvaluator`` adds; main score ``map``. A line without a
  positive is an error (it cannot be scored); a line without a negative is skipped, as mteb skips
  it (every ranking of it is perfect), and counted in the protocol. Ties: a negative tied with a
  positive ranks above it, so that an encoder never gains from a tie (a degenerate encoder whose
  cosines are all equal scores its worst, not its best); mteb's sklearn average precision gives
  a tied group a value between the two, so they agree whenever no positive ties a negative.

Per-item outputs are kind ``ranking``: one per-query (per-line) array per metric, whose mean x100
is that metric, so that intervals, ``compare`` and the leaderboard's marks resample queries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.data_root import DataError
from benchharness.core.kinds import PAIRS, SEARCH, VECTORS, SearchContext
from benchharness.core.prompts import DOCUMENT, Role
from benchharness.core.task import Embed, Evaluation, Metrics, TaskMetadata
from benchharness.data.readers import excerpt
from benchharness.scoring.graded import ndcg_at, retrieval_per_query
from benchharness.scoring.quantized_search import QuantizedCorpus, describe
from benchharness.scoring.ranking import average_precision, means, ranked_relevance, reciprocal_rank
from benchharness.scoring.top_k import DOC_BLOCK, exact_ties, refuse_constant
from benchharness.scoring.views import as_view
from benchharness.tasks.files.base import GROUP, Declaration, FileTask, Row, sentence
from benchharness.tasks.files.beir import BeirData, beir_files, count_scored, read_beir

logger = logging.getLogger(__name__)

#: protocol variants; the leaderboard finds file tasks by their ``file-`` prefix
RETRIEVAL_PROTOCOL = "file-beir-retrieval-cosine"
RERANKING_PROTOCOL = "file-reranking-cosine"
NDCG_K, MAP_K, MRR_K, RECALL_K = 10, 100, 10, 100
#: documents retrieved per query: enough for every cutoff
DEPTH = max(NDCG_K, MAP_K, MRR_K, RECALL_K)
BEIR_REFERENCE = "BEIR (Thakur et al. 2021); metrics by pytrec_eval's definitions, as BEIR and mteb report them"
RERANKING_REFERENCE = "mteb's RerankingEvaluator (Muennighoff et al. 2023)"
DOCUMENT_TEXT = "title + ' ' + text, stripped, when the title is non-empty, else text stripped (mteb, BEIR)"


COSINE = "cosine (L2-normalised inner product, exact search; a zero vector scores 0)"


class FileRetrievalTask(FileTask):
    """A BEIR folder: corpus search by cosine, pytrec_eval's metrics."""

    data: BeirData

    def __init__(self, decl: Declaration) -> None:
        super().__init__()
        self.decl = decl
        # a quantized index is built from dense vectors; the exact search is any kind's
        self.takes = frozenset({SEARCH} if decl.search == "float32" else {VECTORS})
        split = decl.split or "test"
        self.metadata = TaskMetadata(
            name=decl.name,
            family="retrieval",
            split=split,
            main_score=f"ndcg@{NDCG_K}",
            description=f"BEIR folder {decl.path}, {split} split: queries against the corpus, cosine",
            protocol=RETRIEVAL_PROTOCOL,
            reference=BEIR_REFERENCE,
            groups=(GROUP,),
            protocol_details={
                "similarity": COSINE if decl.search == "float32" else describe(decl.search, decl.rescore, DEPTH),
                "roles": "queries in the query role (with the task's instruction), corpus in the document role",
                "queries": "those this split's qrels give a relevant document (score > 0), in queries.jsonl "
                "order; a query whose judgements are all 0 or below is dropped (mteb scores it 0)",
                "relevance": "score > 0 is relevant; nDCG gain = the score (linear, pytrec_eval's ndcg_cut)",
                "ndcg": f"nDCG@{NDCG_K} (pytrec_eval ndcg_cut.{NDCG_K})",
                "map": f"MAP@{MAP_K}: precisions at relevant ranks within {MAP_K}, / all relevant "
                f"(pytrec_eval map_cut.{MAP_K})",
                "mrr": f"MRR@{MRR_K} (mteb's)",
                "recall": f"recall@{RECALL_K} (pytrec_eval recall.{RECALL_K})",
                "ties": "score desc, then corpus order (pytrec_eval's order as named here); 'ties' counts "
                "the adjacent equal scores in the top lists; lists that are one score throughout for "
                "every query are refused (no score)",
                "self_retrieval": "not excluded (mteb's default)",
            },
        )

    def _read_declared(self) -> BeirData:
        return read_beir(self.decl.path, self.decl.split or "test")

    def _data_files(self) -> list[Path]:
        return beir_files(self.decl.path, self.decl.split or "test")

    def _summary(self) -> tuple[int, dict[str, Any]]:
        """Before the task is loaded, the number of scored queries from the qrels alone: listing
        tasks reads no corpus (a BEIR corpus may hold millions of documents)."""
        if "content" in self.__dict__:
            return super()._summary()
        return count_scored(self._data_files()[2]), self._source()

    def _source(self) -> dict[str, Any]:
        return {
            "folder": self.decl.path.name,
            "files": [str(f.relative_to(self.decl.path)) for f in self._data_files()],
            "document_text": DOCUMENT_TEXT,
            "query_text": "as in queries.jsonl",
        }

    def _use(self, content: BeirData) -> None:
        self.data = content

    def _details(self, content: BeirData) -> dict[str, Any]:
        return {"n_corpus": len(content.documents), "queries_dropped": len(content.dropped)}

    def sentences(self) -> list[str]:
        return self.data.queries + self.data.documents

    def requests(self) -> dict[Role, list[str]]:
        return {self.query_role: self.data.queries, DOCUMENT: self.data.documents}

    def search(self, embed: Embed, k: int = DEPTH) -> tuple[np.ndarray, np.ndarray, int | None]:
        """Each query's ``k`` best documents: scores and corpus indices, best first (padded with
        index -1 when the corpus is smaller than ``k``), and the bytes the corpus's vectors take in
        the index searched (None for a view that holds no index: a run file, a pipeline). Cosines by
        default; with ``search = "int8"`` or ``"binary"``, the quantized index's scores
        (``scoring.quantized_search``), rescored when ``rescore`` says."""
        documents = self.data.documents
        if self.decl.search == "float32":
            view = as_view(embed)
            roles = (self.query_role, DOCUMENT)
            scores, ids = view.search(self.data.queries, documents, k, roles, context=self.search_context())
            index_bytes = view.facts().get("index_bytes")
            return scores, ids, None if index_bytes is None else int(index_bytes)

        def blocks() -> Iterator[np.ndarray]:
            return (embed(documents[i : i + DOC_BLOCK], DOCUMENT) for i in range(0, len(documents), DOC_BLOCK))

        queries = embed(self.data.queries, self.query_role)
        corpus = QuantizedCorpus.build(blocks, self.decl.search)
        return (*corpus.search(queries, k, rescore=self.decl.rescore), corpus.nbytes)

    def search_context(self) -> SearchContext:
        """What the search is told beside the texts: the folder's query and document ids (a run
        file's lists are found by them) and each query's relevant documents (a pipeline's ceiling,
        and its variant that reranks the positives its first stage missed)."""
        return SearchContext(self.data.query_ids, self.data.corpus_ids, self.data.relevant)

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics and, per query, the nDCG@10, AP@100, RR@10 and recall@100 they average."""
        scores, ids, index_bytes = self.search(embed)
        refuse_constant(scores, self.name)
        gains = [
            np.array([rel.get(int(i), 0) for i in row], dtype=np.float64) for row, rel in zip(ids, self.data.relevant)
        ]
        ideal = [np.fromiter(rel.values(), dtype=np.float64) for rel in self.data.relevant]
        per_query = retrieval_per_query(gains, ideal, NDCG_K, MAP_K, MRR_K, RECALL_K)
        metrics: Metrics = {
            **means(per_query),
            "n_queries": self.data.n,
            "n_corpus": len(self.data.documents),
            "ties": exact_ties(scores),
            **({} if index_bytes is None else {"index_bytes": index_bytes}),
        }
        return Evaluation(metrics, per_query, "ranking")


@dataclass(frozen=True)
class Reranking:
    """The scored lines of a reranking file."""

    queries: list[str]
    positives: list[list[str]]
    negatives: list[list[str]]
    skipped: int  # lines without a negative

    @property
    def n(self) -> int:
        return len(self.queries)


class FileRerankingTask(FileTask):
    """Query lines with positive and negative candidates: rerank each line's candidates by cosine, or
    by the pair score of a model of another kind."""

    reranking: Reranking
    takes = frozenset({PAIRS})

    def __init__(self, decl: Declaration) -> None:
        super().__init__()
        self.decl = decl
        self.metadata = TaskMetadata(
            name=decl.name,
            family="reranking",
            split="all",
            main_score="map",
            description=f"reranking lines from {decl.path}: each query's positives and negatives ranked by cosine",
            protocol=RERANKING_PROTOCOL,
            reference=RERANKING_REFERENCE,
            groups=(GROUP,),
            protocol_details={
                "similarity": "cosine (zero vector -> 0)",
                "roles": "queries in the query role (with the task's instruction), candidates in the document role",
                "map": "average precision over each line's whole ranking of positives and negatives, "
                "mean over lines (mteb's RerankingEvaluator)",
                "mrr": f"MRR@{MRR_K}",
                "ndcg": f"nDCG@{NDCG_K} of each line's ranking, gain 1 for a positive (as "
                "sentence-transformers' CrossEncoderRerankingEvaluator reports it)",
                "ties": "a negative tied with a positive ranks above it",
                "lines": "a line without a positive is an error; one without a negative is skipped (as mteb)",
            },
        )

    def _read(self, rows: list[Row]) -> Reranking:
        path, cols = self.decl.path, self.decl.columns
        reranking = Reranking([], [], [], 0)
        skipped = 0
        for line, rec in rows:  # row by row: the first problem in the file is the one reported
            query = sentence(path, line, rec[cols["query"]], cols["query"])
            positive = _candidates(path, line, rec[cols["positive"]], cols["positive"])
            negative = _candidates(path, line, rec[cols["negative"]], cols["negative"])
            if not positive:
                raise DataError(
                    f"{path}:{line}: {cols['positive']!r} is empty; every line needs at least one positive to be scored"
                )
            if not negative:
                skipped += 1
                continue
            reranking.queries.append(query)
            reranking.positives.append(positive)
            reranking.negatives.append(negative)
        if not reranking.queries:
            raise DataError(f"{path}: no line has a negative; a reranking task ranks positives among negatives")
        if skipped:
            logger.info("%s: %d line(s) without a negative skipped (as mteb does)", path, skipped)
        return Reranking(reranking.queries, reranking.positives, reranking.negatives, skipped)

    def _use(self, content: Reranking) -> None:
        self.reranking = content

    def _details(self, content: Reranking) -> dict[str, Any]:
        return {
            "lines_skipped_no_negative": content.skipped,
            "n_candidates": sum(len(p) + len(n) for p, n in zip(content.positives, content.negatives)),
        }

    def _candidates_of(self, i: int) -> list[str]:
        """Line ``i``'s candidates, negatives first: with the stable ranking, ties go against positives."""
        return [*self.reranking.negatives[i], *self.reranking.positives[i]]

    def sentences(self) -> list[str]:
        return self.reranking.queries + [c for i in range(self.reranking.n) for c in self._candidates_of(i)]

    def requests(self) -> dict[Role, list[str]]:
        return {
            self.query_role: self.reranking.queries,
            DOCUMENT: [c for i in range(self.reranking.n) for c in self._candidates_of(i)],
        }

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics and, per line, the AP, RR@10 and nDCG@10 they average."""
        ap, rr, ndcg = [], [], []
        view = as_view(embed)
        for lines in self._blocks():
            left = [self.reranking.queries[i] for i in lines for _ in self._candidates_of(i)]
            right = [c for i in lines for c in self._candidates_of(i)]
            pair_scores = view.pairs(left, right, (self.query_role, DOCUMENT))
            start = 0
            for i in lines:
                n_neg, n_pos = len(self.reranking.negatives[i]), len(self.reranking.positives[i])
                scores = pair_scores[start : start + n_neg + n_pos]
                start += n_neg + n_pos
                ranked = ranked_relevance(scores, np.r_[np.zeros(n_neg, bool), np.ones(n_pos, bool)])
                ap.append(average_precision(ranked))
                rr.append(reciprocal_rank(ranked, MRR_K))
                ndcg.append(ndcg_at(ranked, np.ones(n_pos), NDCG_K))
        per_line = {
            "map": np.asarray(ap, dtype=np.float64),
            f"mrr@{MRR_K}": np.asarray(rr, dtype=np.float64),
            f"ndcg@{NDCG_K}": np.asarray(ndcg, dtype=np.float64),
        }
        metrics: Metrics = {**means(per_line), "n_queries": self.reranking.n}
        return Evaluation(metrics, per_line, "ranking")

    def _blocks(self) -> Iterator[list[int]]:
        """Lines in order, grouped so that a group's candidates number about ``DOC_BLOCK``."""
        group: list[int] = []
        size = 0
        for i in range(self.reranking.n):
            group.append(i)
            size += len(self.reranking.negatives[i]) + len(self.reranking.positives[i])
            if size >= DOC_BLOCK:
                yield group
                group, size = [], 0
        if group:
            yield group


def _candidates(path: Path, line: int, value: Any, column: str) -> list[str]:
    if not isinstance(value, list):
        raise DataError(f"{path}:{line}: {column!r} is {excerpt(value)}; expected a list of texts")
    return [sentence(path, line, v, f"{column}[{j}]") for j, v in enumerate(value)]
