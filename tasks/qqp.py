"""Quora Question Pairs as retrieval, PaSeR's setting, with exact faiss search.

File: ``quora_duplicate_questions.tsv`` (header ``id qid1 qid2 question1 question2 is_duplicate``,
tab-separated, ~404k rows; a few questions span lines inside double quotes, so it is read with
the csv module, not line by line).

Setting (PaSeR): the corpus is every question2 text; the queries are the question1 texts that have
at least one duplicate; a query's relevant documents are its duplicate question2s. MAP and MRR@10.
docs/PROTOCOLS.md leaves three points open; the choices, recorded in every result:

1. **Deduplication**: texts are compared after ``strip()``. Identical question2 texts are one
   corpus document (otherwise one question would be retrieved, and counted, several times);
   identical question1 texts are one query whose relevant set is the union over its rows.
2. **Self-retrieval**: a query never retrieves the corpus document with its own text, and that
   document is not counted as relevant (a pair of identical strings is not a retrieval problem,
   as BEIR's evaluation ignores the query's own id); queries left without a relevant document
   are dropped.
3. **MAP cutoff**: MAP@100 over the top 100, each query's sum divided by min(100, relevant),
   as sentence-transformers' InformationRetrievalEvaluator does; MRR@10 as usual.

Search: embeddings are L2-normalised (cosine; a zero vector stays zero) and searched exactly
(``benchharness.scoring.top_k``: faiss ``IndexFlatIP``) one block of corpus documents at a time,
embedded as it is searched, so memory holds the queries, one block of documents and the top-k
lists, never the corpus or a query x corpus score matrix. Ties follow the shared rule of
``benchharness.scoring.ranking``: score desc, then corpus order.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np

from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.kinds import SEARCH, VECTORS, SearchContext
from benchharness.core.prompts import DOCUMENT, Role
from benchharness.core.task import BoardColumn, Embed, Evaluation, Metrics, Task, TaskMetadata, TaskProvider
from benchharness.data.readers import undecodable_message
from benchharness.scoring.quantized_search import QuantizedCorpus, describe
from benchharness.scoring.ranking import average_precision, reciprocal_rank
from benchharness.scoring.top_k import DOC_BLOCK
from benchharness.scoring.views import as_view
from benchharness.tasks import boards

REL = "qqp/quora_duplicate_questions.tsv"
HEADER = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
MAP_K, MRR_K = 100, 10


def read_pairs(path: Path) -> list[tuple[str, str, int]]:
    """(question1, question2, is_duplicate) for every row; errors name the file and line."""
    rows = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        try:
            header = next(reader, None)
            if header is None or [h.strip().lstrip("\ufeff") for h in header] != HEADER:
                raise DataError(f"{path}:1: expected the header {' '.join(HEADER)}, got {header}")
            for fields in reader:
                if len(fields) != 6 or fields[5] not in ("0", "1"):
                    raise DataError(f"{path}:{reader.line_num}: expected 6 tab-separated fields ending in 0/1")
                rows.append((fields[3].strip(), fields[4].strip(), int(fields[5])))
        except csv.Error as exc:  # e.g. a quoted field longer than csv's field size limit
            raise DataError(f"{path}:{reader.line_num}: {exc}") from None
        except UnicodeDecodeError as exc:
            with open(path, encoding="utf-8", newline="", errors="surrogateescape") as again:
                raise DataError(undecodable_message(path, again, exc)) from None
    return rows


def build_retrieval(rows: list[tuple[str, str, int]]) -> tuple[list[str], list[str], list[np.ndarray]]:
    """Corpus (unique question2 texts, first-seen order), queries, and each query's relevant ids."""
    corpus_ids: dict[str, int] = {}
    for _, q2, _ in rows:
        corpus_ids.setdefault(q2, len(corpus_ids))
    relevant: dict[str, set[int]] = {}
    for q1, q2, dup in rows:
        if dup and q2 != q1:
            relevant.setdefault(q1, set()).add(corpus_ids[q2])
    queries = list(relevant)
    return list(corpus_ids), queries, [np.array(sorted(relevant[q])) for q in queries]


class QQP(Task):
    """PaSeR's QQP retrieval; ``search``/``rescore`` give the variants searched in a quantized index
    (``scoring.quantized_search``), which vary the search only: off the board, out of the group."""

    def __init__(self, search: str = "float32", rescore: int | None = None) -> None:
        super().__init__()
        self.search, self.rescore = search, rescore
        # a quantized index is built from dense vectors; the exact search is any kind's
        self.takes = frozenset({SEARCH} if search == "float32" else {VECTORS})
        name = next((n for n, setting in VARIANTS.items() if setting == (search, rescore)), "QQP")
        similarity = (
            "cosine (L2-normalised inner product, faiss IndexFlatIP)"
            if search == "float32"
            else describe(search, rescore, MAP_K)
        )
        self.metadata = TaskMetadata(
            name=name,
            family="retrieval",
            description="Quora Question Pairs as retrieval: question1 queries against all question2 texts",
            split="all",
            main_score="map",
            protocol="paser-qqp-retrieval",
            reference="PaSeR (Wu et al.); Quora Question Pairs (Iyer et al. 2017)",
            groups=("qqp",) if search == "float32" else (),
            board=boards.RANKING,
            on_board=search == "float32",
            board_columns=(BoardColumn("QQP MAP", "map", "QQP_MAP"), BoardColumn("QQP MRR@10", "mrr@10", "QQP_MRR10")),
            protocol_details={
                "corpus": "unique question2 texts (strip, exact match dedup)",
                "queries": "unique question1 texts with at least one duplicate question2 of a different text",
                "self_retrieval": "the corpus document with the query's own text is excluded and not relevant",
                "map": f"MAP@{MAP_K}, sum of precisions divided by min({MAP_K}, relevant)",
                "mrr": f"MRR@{MRR_K}",
                "similarity": similarity,
                "ties": "score desc, then corpus order",
            },
        )

    def _load(self, data: DataRoot) -> None:
        rows = read_pairs(self._path(data, REL, "qqp"))
        self.corpus, self.queries, self.relevant = build_retrieval(rows)
        if not self.queries:
            raise DataError(f"{self.files[0]}: no question1 has a duplicate; is_duplicate column empty?")
        position = {t: i for i, t in enumerate(self.corpus)}
        self.own = np.array([position.get(q, -1) for q in self.queries])

    def sentences(self) -> list[str]:
        return self.corpus + self.queries

    def requests(self) -> dict[Role, list[str]]:
        return {DOCUMENT: self.corpus, self.query_role: self.queries}

    def evaluate(self, embed: Embed, seed: int) -> Metrics:
        return self.evaluate_items(embed, seed).metrics

    def evaluate_items(self, embed: Embed, seed: int) -> Evaluation:
        """Metrics and, per query, the AP@100 (under both names it is reported as) and RR@10."""

        extra: Metrics = {}
        if self.search == "float32":
            roles = (self.query_role, DOCUMENT)
            # the relevance, for a pipeline's ceiling and its variant that reranks the positives missed;
            # QQP's texts have no ids, so a run file cannot be its first stage
            context = SearchContext(relevant=self.relevant)
            _, ids = as_view(embed).search(self.queries, self.corpus, MAP_K, roles, exclude=self.own, context=context)
        else:

            def blocks() -> Iterator[np.ndarray]:
                return (embed(self.corpus[i : i + DOC_BLOCK], DOCUMENT) for i in range(0, len(self.corpus), DOC_BLOCK))

            queries = embed(self.queries, self.query_role)
            corpus = QuantizedCorpus.build(blocks, self.search)
            _, ids = corpus.search(queries, MAP_K, rescore=self.rescore, exclude=self.own)
            extra["index_bytes"] = corpus.nbytes
        ap, rr = [], []
        for top, rel in zip(ids, self.relevant):
            hits = np.isin(top, rel)
            ap.append(average_precision(hits, MAP_K, len(rel)))
            rr.append(reciprocal_rank(hits, MRR_K))
        metrics: Metrics = {
            f"map@{MAP_K}": 100 * float(np.mean(ap)),
            "map": 100 * float(np.mean(ap)),
            f"mrr@{MRR_K}": 100 * float(np.mean(rr)),
            "n_queries": len(self.queries),
            "n_corpus": len(self.corpus),
            **extra,
        }
        ap_arr = np.asarray(ap, dtype=np.float64)
        items = {f"map@{MAP_K}": ap_arr, "map": ap_arr, f"mrr@{MRR_K}": np.asarray(rr, dtype=np.float64)}
        return Evaluation(metrics, items, "ranking")


#: the quantized-index variants: int8 codes, sign bits, and sign bits rescored x4 (the practice's setting)
VARIANTS = {
    f"QQP-{s}" + (f"-rescore{r}" if r else ""): (s, r) for s, r in (("int8", None), ("binary", None), ("binary", 4))
}

TASKS = TaskProvider(
    tasks={"QQP": QQP, **{name: partial(QQP, s, r) for name, (s, r) in VARIANTS.items()}},
    groups={"qqp": ["QQP"]},
    order=30,
)
