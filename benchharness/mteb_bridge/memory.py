"""In-memory mteb tasks, built the way mteb's own mock tasks are (``mteb.mocks``): a task class
whose ``load_data`` fills ``self.dataset`` from Python lists, so mteb's evaluators run on data we
choose, with no download. The cross-check tests run mteb's evaluation on benchharness's own pairs
with them, and ``benchmarks/mteb_overhead.py`` times the wrapper offline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datasets import Dataset, DatasetDict
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.sts import AbsTaskSTS
from mteb.abstasks.task_metadata import TaskMetadata

#: the metadata every in-memory task shares (mteb requires each field)
TASK_ARGS: dict[str, Any] = {
    "description": "benchharness cross-check task built in memory",
    "reference": "https://github.com/embeddings-benchmark/mteb",
    "dataset": {"path": "NA", "revision": "NA"},
    "category": "t2t",
    "eval_splits": ["test"],
    "eval_langs": ["eng-Latn"],
    "date": ("2012-01-01", "2016-12-31"),
    "dialect": [],
    "domains": [],
    "task_subtypes": [],
    "license": "not specified",
    "annotations_creators": "human-annotated",
    "modalities": ["text"],
    "sample_creation": "found",
    "bibtex_citation": "",
}


def sts_task(
    name: str, first: Sequence[str], second: Sequence[str], gold: Sequence[float], max_score: float = 5
) -> AbsTaskSTS:
    """An mteb STS task over the given pairs (mteb normalises gold by ``max_score``: rank-neutral)."""

    class InMemorySTS(AbsTaskSTS):
        metadata = TaskMetadata(type="STS", name=name, main_score="cosine_spearman", **TASK_ARGS)
        min_score = 0

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = DatasetDict(
                {
                    "test": Dataset.from_dict(
                        {"sentence1": list(first), "sentence2": list(second), "score": [float(g) for g in gold]}
                    )
                }
            )
            self.data_loaded = True

    InMemorySTS.max_score = max_score  # type: ignore[assignment]  # mteb annotates int; a gold scale need not end on one
    return InMemorySTS()


def multilingual_sts_task(
    name: str, subsets: dict[str, tuple[str, Sequence[str], Sequence[str], Sequence[float]]], max_score: float = 5
) -> AbsTaskSTS:
    """An mteb STS task with a Hugging Face subset per entry of ``subsets``: ``{subset: (language
    as mteb writes it, e.g. "deu-Latn", first, second, gold)}`` (what language and subset filters select on)."""

    class InMemoryMultilingualSTS(AbsTaskSTS):
        metadata = TaskMetadata(
            type="STS",
            name=name,
            main_score="cosine_spearman",
            **{**TASK_ARGS, "eval_langs": {subset: [lang] for subset, (lang, *_) in subsets.items()}},
        )
        min_score = 0

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {
                subset: DatasetDict(
                    {
                        "test": Dataset.from_dict(
                            {"sentence1": list(first), "sentence2": list(second), "score": [float(g) for g in gold]}
                        )
                    }
                )
                for subset, (_, first, second, gold) in subsets.items()
                if subset in self.hf_subsets
            }
            self.data_loaded = True

    InMemoryMultilingualSTS.max_score = max_score  # type: ignore[assignment]  # as in sts_task
    return InMemoryMultilingualSTS()


def retrieval_task(
    name: str, queries: Mapping[str, str], corpus: Mapping[str, str], relevant: Mapping[str, Mapping[str, int]]
) -> AbsTaskRetrieval:
    """An mteb retrieval task (main score nDCG@10, as most of mteb's): ``queries`` and ``corpus``
    map ids to texts, ``relevant`` each query's judged documents to their relevance."""
    meta = TaskMetadata(type="Retrieval", name=name, main_score="ndcg_at_10", **TASK_ARGS)
    return _retrieval(meta, queries, corpus, {q: dict(docs) for q, docs in relevant.items()}, None)


def reranking_task(
    name: str,
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    candidates: Mapping[str, Sequence[str]],
    relevant: Mapping[str, set[str]],
) -> AbsTaskRetrieval:
    """An mteb reranking task: each query reranks its candidate ids (``top_ranked``); qrels give
    1 to the relevant candidates and 0 to the others, as mteb's AskUbuntuDupQuestions does."""
    meta = TaskMetadata(type="Reranking", name=name, main_score="map_at_1000", **TASK_ARGS)
    judged = {q: {d: int(d in relevant[q]) for d in cands} for q, cands in candidates.items()}
    return _retrieval(meta, queries, corpus, judged, {q: list(cands) for q, cands in candidates.items()})


def _retrieval(
    meta: TaskMetadata,
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    relevant: dict[str, dict[str, int]],
    top_ranked: dict[str, list[str]] | None,
) -> AbsTaskRetrieval:
    """A retrieval task of ``meta`` whose test split holds these texts, judgements and candidate
    lists, in mteb's current layout."""

    class InMemoryRetrieval(AbsTaskRetrieval):
        metadata = meta

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            split: RetrievalSplitData = {
                "queries": Dataset.from_list([{"id": q, "text": t} for q, t in queries.items()]),
                "corpus": Dataset.from_list([{"id": d, "text": t} for d, t in corpus.items()]),
                "relevant_docs": relevant,
                "top_ranked": top_ranked,
            }
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

    return InMemoryRetrieval()
