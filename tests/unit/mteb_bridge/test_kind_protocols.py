"""mteb tasks for every kind of model: what each mteb task takes of a model (by its task type and its
data), models that are not dense handed to mteb's evaluation in the protocol mteb 2 takes them in,
and refusals in one line before anything is encoded.

The references are mteb's own search code run on models written here, independently of the kinds'
views: a dense ``EncoderProtocol`` of the same letter counts with a dot product (searched and
reranked by mteb's ``SearchEncoderWrapper``), and a ``CrossEncoderProtocol`` calling the same pair
function. No network: in-memory tasks (``mteb_bridge.memory``) and mteb's mock tasks.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="mteb-cache-"))
mteb = pytest.importorskip("mteb")

from mteb.abstasks.retrieval import AbsTaskRetrieval  # noqa: E402
from mteb.abstasks.task_metadata import TaskMetadata  # noqa: E402
from mteb.mocks import mock_tasks  # noqa: E402
from mteb.models import ModelMeta  # noqa: E402
from mteb.models.abs_encoder import AbsEncoder  # noqa: E402

import benchharness  # noqa: E402
from benchharness.core.kind_models import SparseModel  # noqa: E402
from benchharness.core.kinds import CROSS_ENCODER, MULTI_VECTOR, PAIRS, SEARCH, SPARSE, VECTORS, ViewSettings  # noqa: E402
from benchharness.core.prompts import DEFAULT, Prompts, Role  # noqa: E402
from benchharness.mteb_bridge import evaluate as bridge  # noqa: E402
from benchharness.mteb_bridge.as_model import MtebEncoder, model_meta  # noqa: E402
from benchharness.mteb_bridge.as_task import MtebTask, operations  # noqa: E402
from benchharness.mteb_bridge.memory import TASK_ARGS, reranking_task, retrieval_task  # noqa: E402
from tests.fakes import HashEncoder  # noqa: E402

LETTERS = "abcdefghijklmnopqrstuvwxyz"
QUERIES = {
    "q0": "a cat on the mat",
    "q1": "dogs run fast",
    "q2": "quiet zebra",
    "q3": "the blue sky",
    "q4": "rain falls",
    "q5": "a jazz quartet",
}
CORPUS = {
    "d0": "the cat sat on a mat",
    "d1": "a dog runs fast",
    "d2": "zebras are quiet",
    "d3": "blue skies today",
    "d4": "heavy rain fell",
    "d5": "quartets play jazz",
    "d6": "a hat",
    "d7": "fast cars",
    "d8": "the quick brown fox jumps over the lazy dog",
}
RELEVANT = {"q0": {"d0"}, "q1": {"d1", "d7"}, "q2": {"d2"}, "q3": {"d3"}, "q4": {"d4"}, "q5": {"d5"}}
CANDIDATES = {q: sorted({*rel, "d6", "d7", "d8", f"d{(int(q[1]) + 1) % 6}"}) for q, rel in RELEVANT.items()}
TASKS = {
    "XRetrieval": lambda: retrieval_task(
        "XRetrieval", QUERIES, CORPUS, {q: dict.fromkeys(r, 1) for q, r in RELEVANT.items()}
    ),
    "XReranking": lambda: reranking_task("XReranking", QUERIES, CORPUS, CANDIDATES, RELEVANT),
    **{
        task.metadata.name: task
        for task in (mock_tasks.MockSTSTask, mock_tasks.MockClassificationTask, mock_tasks.LegacyMockClusteringFastTask)
    },
}


@pytest.fixture(autouse=True)
def in_memory_tasks(monkeypatch):
    monkeypatch.setattr(bridge, "get_task", lambda name: TASKS[name]())


def letter_counts(sentences: Sequence[str]) -> np.ndarray:
    return np.array([[s.count(c) for c in LETTERS] for s in sentences], dtype=np.float32).reshape(-1, len(LETTERS))


class Letters(SparseModel):
    """A sparse model of letter counts (one column a letter), scored by dot product; it records the
    role of every text it encodes."""

    role_aware = True

    def __init__(self, prompts: Prompts | None = None) -> None:
        super().__init__("mine")
        self.prompts = prompts or Prompts()
        self.encoded: list[tuple[Role, str]] = []

    def encode_sparse(self, sentences: Sequence[str], role: Role = DEFAULT) -> sp.csr_matrix:
        self.encoded += [(role, s) for s in sentences]
        return sp.csr_matrix(letter_counts(sentences))

    @property
    def vocabulary_size(self) -> int:
        return len(LETTERS)

    def identity_info(self) -> dict[str, Any]:
        return {"family": "toy", "rows": "letter counts"}


class MtebLetters(AbsEncoder):
    """The reference: mteb's own encoder protocol over the same letter counts, dense, by dot product."""

    mteb_model_meta = ModelMeta.create_empty(overwrites={"name": "reference/letters", "revision": "1"})

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        return letter_counts([text for batch in inputs for text in batch["text"]])

    def similarity(self, embeddings1, embeddings2):
        return np.asarray(embeddings1) @ np.asarray(embeddings2).T


def overlap(pairs: list[tuple[str, str]]) -> list[float]:
    """A pair score: shared letters, and a little of the document's length to break ties."""
    return [len(set(a) & set(b)) + len(b) / 100 for a, b in pairs]


class Counting:
    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def __call__(self, pairs: list[tuple[str, str]]) -> list[float]:
        self.pairs += pairs
        return overlap(pairs)


class MtebOverlap:
    """The reference: a cross-encoder in mteb's protocol scoring by the same function."""

    mteb_model_meta = ModelMeta.create_empty(overwrites={"name": "reference/overlap", "revision": "1"})

    def predict(self, inputs1, inputs2, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts1 = [text for batch in inputs1 for text in batch["text"]]
        return np.array(overlap(list(zip(texts1, [text for batch in inputs2 for text in batch["text"]]))))


def mteb_scores(model, name: str) -> dict[str, float]:
    """mteb's own evaluation of ``model`` on the task ``name``, flattened as the bridge stores it."""
    outcome = mteb.evaluate(model, TASKS[name](), cache=None, show_progress_bar=False, co2_tracker=False)
    return bridge.flatten_scores(outcome.task_results[0].scores)


def ours(model: Any, task: str, **settings: Any) -> benchharness.Result:
    [result] = benchharness.evaluate(model, [MtebTask(task)], intervals=False, **settings)
    return result


# --- what a task takes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "takes"),
    [
        ("XRetrieval", {SEARCH}),
        ("XReranking", {PAIRS}),
        ("MockSTSTask", {VECTORS}),
        ("MockClassificationTask", {VECTORS}),
        ("LegacyMockClusteringFastTask", {VECTORS}),
    ],
)
def test_an_mteb_task_takes_what_its_type_is_evaluated_with(task, takes):
    assert MtebTask(task).takes == takes


def test_a_retrieval_task_with_candidate_lists_takes_pairs_whatever_its_type_says():
    task = reranking_task("XMislabelled", QUERIES, CORPUS, CANDIDATES, RELEVANT)
    task.metadata = task.metadata.model_copy(update={"type": "Retrieval"})
    assert operations(task) == {SEARCH}  # before its data are read: what its type says
    bridge.load_task_data(task)
    assert operations(task) == {PAIRS}


def test_an_old_layout_retrieval_task_is_read_in_mteb_s_current_one():
    """mteb still ships retrieval tasks that fill ``queries``/``corpus``/``top_ranked`` (m_follow_ir):
    their candidate lists are seen once loaded, as mteb's evaluation converts them."""

    class OldLayout(AbsTaskRetrieval):
        metadata = TaskMetadata(type="Retrieval", name="XOldLayout", main_score="ndcg_at_10", **TASK_ARGS)

        def load_data(self, num_proc=None, **kwargs) -> None:
            self.queries = {"test": dict(QUERIES)}
            self.corpus = {"test": {d: {"title": "", "text": t} for d, t in CORPUS.items()}}
            self.relevant_docs = {"test": {q: dict.fromkeys(r, 1) for q, r in RELEVANT.items()}}
            self.top_ranked = {"test": CANDIDATES}
            self.data_loaded = True

    task = OldLayout()
    bridge.load_task_data(task)
    assert operations(task) == {PAIRS}
    assert set(task.dataset["default"]["test"]["corpus"]["id"]) == set(CORPUS)


# --- scores equal mteb's own -------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["XRetrieval", "XReranking"])
def test_a_sparse_model_scores_what_mteb_s_search_scores(task):
    model = Letters()
    result = ours(model, task)
    reference = mteb_scores(MtebLetters(), task)
    assert set(reference) <= set(result.metrics)
    assert max(abs(result.metrics[k] - v) for k, v in reference.items()) < 1e-6
    assert 20 < result.main_score < 100  # neither degenerate nor perfect
    # the kind's figures join the scores, per split and subset (letters a query holds, on average)
    queries = [text for role, text in model.encoded if role.name == "query"]
    assert result.metrics["test/default/query_active_dims"] == pytest.approx(
        np.mean([len(set(q) & set(LETTERS)) for q in dict.fromkeys(queries)])
    )
    assert {str(role) for role, _ in model.encoded} == {"query", "document"}


def test_a_cross_encoder_scores_each_query_s_candidates_as_mteb_does():
    scorer = Counting()
    result = ours(benchharness.PairScorer(scorer), "XReranking", name="mine")
    reference = mteb_scores(MtebOverlap(), "XReranking")
    assert max(abs(result.metrics[k] - v) for k, v in reference.items()) < 1e-6
    assert result.main_metric == "map_at_1000" and 20 < result.main_score < 100
    expected = {(QUERIES[q], CORPUS[d]) for q, candidates in CANDIDATES.items() for d in candidates}
    assert set(scorer.pairs) == expected and len(scorer.pairs) == len(expected)
    assert result.metrics["test/default/pairs_scored"] == len(expected)


def test_a_rerun_reads_the_scores_from_the_kind_s_cache(tmp_path):
    scorer = Counting()
    model = benchharness.as_encoder(benchharness.PairScorer(scorer), identity="overlap-v1")
    first = MtebTask("XReranking").evaluate_encoder(model, 0, ViewSettings(tmp_path / "cache"))
    scored = len(scorer.pairs)
    again = MtebTask("XReranking").evaluate_encoder(model, 0, ViewSettings(tmp_path / "cache"))
    assert scored > 0 and len(scorer.pairs) == scored  # nothing scored the second time
    assert again.metrics == first.metrics


def test_a_run_s_cache_folder_reaches_an_mteb_task_of_another_kind(tmp_path):
    """Through evaluate (the runner), the run's cache folder is the kind's: a second run scores nothing."""
    scorer = Counting()
    first = ours(benchharness.PairScorer(scorer), "XReranking", identity="overlap-v1", cache_dir=tmp_path / "cache")
    scored = len(scorer.pairs)
    again = ours(benchharness.PairScorer(scorer), "XReranking", identity="overlap-v1", cache_dir=tmp_path / "cache")
    assert scored > 0 and len(scorer.pairs) == scored
    assert again.metrics == first.metrics


def test_an_instruction_model_gets_the_task_s_instruction_on_the_query_side():
    model = Letters(Prompts(instruction_template="Instruct: {instruction}\nQuery: "))
    result = ours(model, "XRetrieval")
    instruction = AbsTaskRetrieval.abstask_prompt  # mteb's instruction for a retrieval task without its own
    assert {role for role, _ in model.encoded} == {Role("query", instruction), Role("document")}
    assert result.encoder_metadata["prompts_applied"] == {"query": f"Instruct: {instruction}\nQuery: ", "document": ""}


def test_a_dense_model_s_result_leaves_out_the_scores_mteb_leaves_undefined():
    """A reranking list of 5 candidates has recall@5 = 1 for every query, and mteb's nAUC of a
    metric every query scores alike is NaN: such a score is left out, and the result is stored
    (it was refused whole, as a NaN score)."""
    result = ours(HashEncoder(dim=16), "XReranking")
    outcome = mteb.evaluate(
        MtebEncoder(HashEncoder(dim=16)), TASKS["XReranking"](), cache=None, show_progress_bar=False, co2_tracker=False
    )
    [scores] = outcome.task_results[0].scores["test"]
    numbers = {k: v for k, v in scores.items() if isinstance(v, float)}
    assert math.isnan(numbers["nauc_recall_at_5_max"]) and result.metrics["test/default/recall_at_5"] == 100.0
    defined = {f"test/default/{k}": 100 * v for k, v in numbers.items() if not math.isnan(v)}
    assert {k: v for k, v in result.metrics.items() if "/" in k} == pytest.approx(defined)


# --- refused before anything is encoded --------------------------------------------------------------


@pytest.mark.parametrize("task", ["MockSTSTask", "MockClassificationTask", "LegacyMockClusteringFastTask"])
def test_a_sparse_model_is_refused_a_task_of_vectors_in_one_line(task):
    model = Letters()
    results = benchharness.evaluate(model, [MtebTask(task)], errors="keep", intervals=False)
    (failed,) = results.failed
    assert failed.message.startswith(
        f"mine is a sparse encoder (one vocabulary-sized vector per text, few terms active), and mteb:{task} "
        "needs vectors (to train a classifier on, cluster or index)"
    )
    assert "\n" not in failed.message
    assert model.encoded == []


@pytest.mark.parametrize(
    ("task", "needs"), [("XRetrieval", "a search of the whole corpus"), ("MockSTSTask", "vectors")]
)
def test_a_cross_encoder_is_refused_a_search_or_a_task_of_vectors(task, needs):
    scorer = Counting()
    results = benchharness.evaluate(
        benchharness.PairScorer(scorer), [MtebTask(task)], name="mine", errors="keep", intervals=False
    )
    (failed,) = results.failed
    assert f"mine is a cross-encoder (a score for each text pair, read together), and mteb:{task} needs {needs}" in (
        failed.message
    )
    assert "\n" not in failed.message and scorer.pairs == []


# --- what mteb is told about the model -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "similarity", "model_type", "scoring"),
    [
        (SPARSE, "dot", "sparse", "dot"),
        (MULTI_VECTOR, "meanmaxsim", "late-interaction", "MaxSim"),
        (CROSS_ENCODER, "the model's pair score", "cross-encoder", None),
    ],
)
def test_mteb_s_metadata_names_the_kind_and_its_similarity(kind, similarity, model_type, scoring):
    meta = model_meta("m", "0123", {"family": "sentence-transformers", "kind": kind}, similarity)
    assert meta.model_type == [model_type]
    assert meta.similarity_fn_name == scoring
