"""Retrieval (BEIR folders) and reranking (JSON lines) tasks declared from files: every metric
against pytrec_eval or scikit-learn on independently computed cosines, the errors naming file and
line, and the whole path through ``benchharness.evaluate`` and the command line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import InvalidInputError
from benchharness.core.prompts import Prompts
from benchharness.reporting.leaderboard import FILE_PROTOCOL_PREFIX
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from tests.fakes import HashEncoder

pytrec_eval = pytest.importorskip("pytrec_eval")


@pytest.fixture(autouse=True)
def no_registrations(monkeypatch):
    """Each test starts and ends with no task declared from Python."""
    monkeypatch.setattr(declarations, "REGISTERED", {})


def write_beir(folder: Path, corpus, queries, qrels, split: str = "test") -> Path:
    """A BEIR folder: corpus rows (id, title, text), query rows (id, text), qrels (query, doc, score)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in corpus)
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": x}) + "\n" for i, x in queries))
    (folder / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    )
    return folder


def loaded(name: str):
    task = tasks.get(name)
    task.load(DataRoot("/nonexistent-data-root"))  # a file task never reads the data root
    return task


def unit_cosines(queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    q = queries.astype(np.float64) / np.linalg.norm(queries.astype(np.float64), axis=1, keepdims=True)
    d = docs.astype(np.float64) / np.linalg.norm(docs.astype(np.float64), axis=1, keepdims=True)
    return q @ d.T


WORDS = [
    "river",
    "stone",
    "light",
    "garden",
    "music",
    "paper",
    "winter",
    "market",
    "silver",
    "forest",
    "engine",
    "letter",
    "window",
    "ocean",
]


def random_folder(tmp_path: Path):
    """150 documents (some titled), 14 queries, graded judgements 0-3: one query judged only 0
    (dropped), one not judged at all, relevant documents also beyond rank 100."""
    rng = np.random.default_rng(31)  # a draw whose top-101 cosines differ by more than 1e-5 (asserted)
    corpus = [
        (
            f"doc{i}",
            " ".join(rng.choice(WORDS, 2)) if i % 3 == 0 else "",
            f"passage {i}: " + " ".join(rng.choice(WORDS, 6)),
        )
        for i in range(150)
    ]
    queries = [(f"q{i}", f"question {i}: " + " ".join(rng.choice(WORDS, 4))) for i in range(14)]
    qrels = []
    for q, _ in queries[:12]:
        docs = rng.choice(150, size=int(rng.integers(1, 9)), replace=False)
        scores = rng.integers(0, 4, size=len(docs))
        scores[0] = max(scores[0], 1)
        qrels += [(q, f"doc{d}", int(s)) for d, s in zip(docs, scores)]
    qrels += [("q12", "doc5", 0), ("q12", "doc7", 0)]  # judged, nothing relevant: dropped
    return write_beir(tmp_path / "beir", corpus, queries, qrels), corpus, queries, qrels


def test_retrieval_metrics_are_pytrec_evals_on_independent_cosines(tmp_path):
    folder, corpus, queries, qrels = random_folder(tmp_path)
    register_file_task("my-beir", folder, kind="retrieval")
    task = loaded("my-beir")
    encoder = HashEncoder(dim=8)
    embed = lambda sentences, role=None: encoder.encode(sentences)  # no prompts: one vector per sentence
    evaluation = task.evaluate_items(embed, 1111)

    # mteb's document text: title + " " + text, stripped, when the title is non-empty
    documents = [(t + " " + x).strip() if t else x.strip() for _, t, x in corpus]
    assert task.data.documents == documents
    scored = [q for q, _ in queries if any(s > 0 for qq, _, s in qrels if qq == q)]
    assert task.data.query_ids == scored and task.metadata.n_samples == len(scored) == 12
    assert task.metadata.protocol_details["queries_dropped"] == 1

    cos = unit_cosines(encoder.encode([dict(queries)[q] for q in scored]), encoder.encode(documents))
    top = -np.sort(-cos, axis=1)[:, :101]
    assert np.diff(-top, axis=1).min() > 1e-5  # ties avoided: any search finds the same order
    qrels_dict: dict[str, dict[str, int]] = {}
    for q, d, s in qrels:
        qrels_dict.setdefault(q, {})[d] = s
    run = {q: {d: float(c) for (d, _, _), c in zip(corpus, row)} for q, row in zip(scored, cos)}
    run10 = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10]) for q, docs in run.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels_dict, {"ndcg_cut.10", "map_cut.100", "recall.100"}).evaluate(run)
    first10 = pytrec_eval.RelevanceEvaluator(qrels_dict, {"recip_rank"}).evaluate(run10)  # MRR@10
    expected = {
        "ndcg@10": [full[q]["ndcg_cut_10"] for q in scored],
        "map@100": [full[q]["map_cut_100"] for q in scored],
        "recall@100": [full[q]["recall_100"] for q in scored],
        "mrr@10": [first10[q]["recip_rank"] for q in scored],
    }
    assert evaluation.kind == "ranking" and set(evaluation.items) == set(expected)
    for key, values in expected.items():
        np.testing.assert_allclose(evaluation.items[key], values, atol=1e-6, rtol=0, err_msg=key)
        assert evaluation.metrics[key] == pytest.approx(100 * np.mean(values), abs=1e-6)
    # the cutoffs bite: some relevant documents lie beyond rank 10 and beyond rank 100
    assert min(expected["recall@100"]) < 1 and np.mean(expected["ndcg@10"]) < np.mean(expected["recall@100"])
    assert (evaluation.metrics["n_queries"], evaluation.metrics["n_corpus"]) == (12, 150)
    meta = task.metadata
    assert (meta.main_score, meta.split, meta.family) == ("ndcg@10", "test", "retrieval")
    assert meta.protocol.startswith(FILE_PROTOCOL_PREFIX)
    assert sorted(p.name for p in task.files) == ["corpus.jsonl", "queries.jsonl", "test.tsv"]


def test_graded_gain_is_linear_and_ties_follow_corpus_order(tmp_path):
    """The first four documents score alike, the last lower: those four keep corpus order, so the
    metrics are known by hand (nDCG's gain is the relevance score itself), and their three
    adjacent ties are counted."""
    corpus = [(f"d{i}", "", f"document {i}") for i in range(5)]
    folder = write_beir(tmp_path / "b", corpus, [("q", "a query")], [("q", "d1", 2), ("q", "d3", 1)])
    register_file_task("ties", folder, kind="retrieval")

    def embed(sentences, role=None):
        return np.array([[0, 1, 0, 0] if s == "document 4" else [1, 0, 0, 0] for s in sentences], np.float32)

    metrics = loaded("ties").evaluate(embed, 0)
    assert metrics["ties"] == 3
    dcg = 2 / np.log2(3) + 1 / np.log2(5)  # d1 at rank 2, d3 at rank 4
    assert metrics["ndcg@10"] == pytest.approx(100 * dcg / (2 + 1 / np.log2(3)), abs=1e-9)
    assert metrics["map@100"] == pytest.approx(100 * (1 / 2 + 2 / 4) / 2, abs=1e-9)
    assert metrics["mrr@10"] == pytest.approx(50.0) and metrics["recall@100"] == pytest.approx(100.0)


def test_split_option_and_listing_reads_no_corpus(tmp_path):
    """``split`` picks the qrels file; the task lists its query count from the qrels alone, so a
    corpus that cannot be read fails at load, not when tasks are listed."""
    folder = write_beir(
        tmp_path / "b",
        [("d0", "", "x"), ("d1", "", "y")],
        [("q0", "a"), ("q1", "b")],
        [("q0", "d0", 1), ("q1", "d1", 1)],
        split="dev",
    )
    (folder / "corpus.jsonl").write_text('{"_id": "d0", "text": "x"}\nnot json\n')
    register_file_task("dev-beir", folder, kind="retrieval", split="dev")
    task = tasks.get("dev-beir")
    assert task.metadata.n_samples == 2 and task.metadata.split == "dev"
    with pytest.raises(DataError, match=re.escape(f"{folder / 'corpus.jsonl'}:2: not JSON")):
        task.load(DataRoot("/nonexistent-data-root"))
    register_file_task("test-beir", folder, kind="retrieval")  # the default split: no qrels/test.tsv
    assert "cannot read" in tasks.get("test-beir").metadata.description


# ------------------------------------------------------------------------------------------------
# reranking


def write_reranking(path: Path, lines) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def reranking_lines():
    rng = np.random.default_rng(3)
    lines = []
    for i in range(30):
        n_pos, n_neg = int(rng.integers(1, 4)), int(rng.integers(1, 15))
        words = lambda k: " ".join(rng.choice(WORDS, k))
        lines.append(
            {
                "query": f"query {i} {words(3)}",
                "positive": [f"pos {i}.{j} {words(5)}" for j in range(n_pos)],
                "negative": [f"neg {i}.{j} {words(5)}" for j in range(n_neg)],
            }
        )
    return lines


def test_reranking_map_is_sklearns_average_precision_and_mrr_at_10_by_hand(tmp_path):
    lines = reranking_lines()
    skipped = {"query": "nothing to rank against", "positive": ["a lone positive"], "negative": []}
    register_file_task(
        "my-rerank", write_reranking(tmp_path / "r.jsonl", [*lines[:5], skipped, *lines[5:]]), kind="reranking"
    )
    task = loaded("my-rerank")
    encoder = HashEncoder(dim=8)
    evaluation = task.evaluate_items(lambda s, role=None: encoder.encode(s), 1111)
    ap, rr = [], []
    for line in lines:
        docs = line["positive"] + line["negative"]
        cos = unit_cosines(encoder.encode([line["query"]]), encoder.encode(docs))[0]
        relevant = np.array([True] * len(line["positive"]) + [False] * len(line["negative"]))
        assert np.diff(np.sort(cos)).min() > 1e-6  # no ties: every tie rule agrees
        ap.append(average_precision_score(relevant, cos))
        first = np.flatnonzero(relevant[np.argsort(-cos)])[0]
        rr.append(1 / (first + 1) if first < 10 else 0.0)
    assert min(rr) == 0.0 < max(rr)  # a first positive beyond rank 10 counts 0
    np.testing.assert_allclose(evaluation.items["map"], ap, atol=1e-12)
    np.testing.assert_allclose(evaluation.items["mrr@10"], rr, atol=1e-12)
    assert evaluation.metrics["map"] == pytest.approx(100 * np.mean(ap), abs=1e-9)
    assert evaluation.metrics["n_queries"] == len(lines) == task.metadata.n_samples
    assert task.metadata.protocol_details["lines_skipped_no_negative"] == 1
    assert (task.metadata.main_score, task.metadata.family, evaluation.kind) == ("map", "reranking", "ranking")


def test_reranking_ties_go_against_the_positives(tmp_path):
    """A constant encoder ties every candidate: the positives rank last, so it scores its worst."""
    register_file_task(
        "tied",
        write_reranking(
            tmp_path / "t.jsonl", [{"query": "q", "positive": ["p1", "p2"], "negative": ["n1", "n2", "n3"]}]
        ),
        kind="reranking",
    )
    metrics = loaded("tied").evaluate(lambda s, role=None: np.ones((len(s), 3), np.float32), 0)
    assert metrics["map"] == pytest.approx(100 * (1 / 4 + 2 / 5) / 2) and metrics["mrr@10"] == pytest.approx(25.0)


# ------------------------------------------------------------------------------------------------
# errors

CORPUS = '{"_id": "d1", "title": "", "text": "one"}\n{"_id": "d2", "text": "two"}\n'
QUERIES = '{"_id": "q1", "text": "first"}\n'
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


@pytest.mark.parametrize(
    "name,corpus,queries,qrels,line,fragment",
    [
        (
            "corpus.jsonl",
            CORPUS + '{"_id": "d1", "text": "again"}\n',
            QUERIES,
            QRELS,
            3,
            "id 'd1' again (first on line 1)",
        ),
        ("queries.jsonl", CORPUS, QUERIES + '\n{"_id": "q1", "text": "again"}\n', QRELS, 3, "id 'q1' again"),
        ("corpus.jsonl", CORPUS + '{"_id": "d3", "text": "three"\n', QUERIES, QRELS, 3, "not JSON"),
        ("corpus.jsonl", CORPUS + '["d3", "three"]\n', QUERIES, QRELS, 3, "a JSON list"),
        ("corpus.jsonl", CORPUS + '{"_id": "d3", "body": "three"}\n', QUERIES, QRELS, 3, "no key 'text'"),
        ("corpus.jsonl", '{"title": "t", "text": "x"}\n', QUERIES, QRELS, 1, "no key '_id'"),
        (
            "corpus.jsonl",
            CORPUS + '{"_id": "d3", "title": "", "text": " "}\n',
            QUERIES,
            QRELS,
            3,
            "neither title nor text",
        ),
        ("queries.jsonl", CORPUS, '{"_id": "q1", "text": ""}\n', QRELS, 1, "expected non-empty text"),
        ("test.tsv", CORPUS, QUERIES, QRELS + "q9\td1\t1\n", 3, "query id 'q9' is not in"),
        ("test.tsv", CORPUS, QUERIES, QRELS + "q1\td9\t1\n", 3, "corpus id 'd9' is not in"),
        ("test.tsv", CORPUS, QUERIES, QRELS + "q1\td1\t2\n", 3, "judged 2 here and 1 on line 2"),
        ("test.tsv", CORPUS, QUERIES, QRELS + "q1\td2\t0.5\n", 3, "score '0.5' is not an integer"),
        ("test.tsv", CORPUS, QUERIES, QRELS + "q1 d2 1\n", 3, "1 tab-separated field(s); expected 3"),
        ("test.tsv", CORPUS, QUERIES, "q1\td1\t1\n", 1, "expected the header query-id corpus-id score"),
        ("test.tsv", CORPUS, QUERIES, "", 1, "empty file"),
    ],
)
def test_retrieval_errors_name_the_file_and_line(tmp_path, name, corpus, queries, qrels, line, fragment):
    folder = tmp_path / "b"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(corpus)
    (folder / "queries.jsonl").write_text(queries)
    (folder / "qrels" / "test.tsv").write_text(qrels)
    register_file_task("broken", folder, kind="retrieval")
    with pytest.raises(DataError) as caught:
        loaded("broken")
    path = folder / ("qrels/test.tsv" if name == "test.tsv" else name)
    message = str(caught.value)
    assert message.startswith(f"{path.resolve()}:{line}: ") and fragment in message and "\n" not in message


@pytest.mark.parametrize(
    "setup,fragment",
    [
        (lambda f: (f / "qrels" / "test.tsv").unlink(), "test.tsv: No such file (the qrels of split 'test'"),
        (lambda f: (f / "corpus.jsonl").write_text("\n"), "corpus.jsonl: no documents"),
        (
            lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t0\n"),
            "no query has a relevant document",
        ),
        (lambda f: (f / "queries.jsonl").unlink(), "queries.jsonl: No such file"),
    ],
)
def test_retrieval_folder_errors(tmp_path, setup, fragment):
    folder = write_beir(tmp_path / "b", [("d1", "", "one")], [("q1", "first")], [("q1", "d1", 1)])
    setup(folder)
    register_file_task("broken", folder, kind="retrieval")
    with pytest.raises(DataError, match=re.escape(fragment)) as caught:
        loaded("broken")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "content,line,fragment",
    [
        ('{"query": "q", "positive": [], "negative": ["n"]}\n', 1, "'positive' is empty"),
        (
            '{"query": "q", "positive": ["p"], "negative": ["n"]}\n{"query": "q", "positive": "p", "negative": []}\n',
            2,
            "'positive' is 'p'; expected a list",
        ),
        ('{"query": "q", "positive": ["p"], "negative": ["n"]}\n{"query": "q", "positive": ["p"]\n', 2, "not JSON"),
        ('{"query": "q", "negative": ["n"]}\n', 1, "no key 'positive'"),
        ('{"query": "", "positive": ["p"], "negative": ["n"]}\n', 1, "'query' is ''"),
        ('{"query": "q", "positive": ["p", 3], "negative": ["n"]}\n', 1, "'positive[1]' is 3"),
    ],
)
def test_reranking_errors_name_the_file_and_line(tmp_path, content, line, fragment):
    path = tmp_path / "r.jsonl"
    path.write_text(content)
    register_file_task("broken", path, kind="reranking")
    with pytest.raises(DataError) as caught:
        loaded("broken")
    message = str(caught.value)
    assert message.startswith(f"{path.resolve()}:{line}: ") and fragment in message and "\n" not in message


@pytest.mark.parametrize(
    "kind,options,fragment",
    [
        ("retrieval", {"split": "../x"}, "split '../x'"),
        ("retrieval", {"format": "csv"}, "unknown key(s) format for kind 'retrieval'"),
        ("reranking", {"score_range": [0, 1]}, "unknown key(s) score_range"),
        ("pairs", {"instruction": 3}, "instruction 3"),
        ("pairs", {"split": "dev"}, "unknown key(s) split"),
    ],
)
def test_bad_ranking_declarations_are_refused(tmp_path, kind, options, fragment):
    with pytest.raises(InvalidInputError, match=re.escape(fragment)):
        register_file_task("ok", tmp_path / "x.jsonl", kind=kind, **options)


# ------------------------------------------------------------------------------------------------
# through benchharness.evaluate and the command line


def small_folder(tmp_path: Path) -> Path:
    corpus = [(f"d{i}", "", f"the {w} is near the {v}") for i, (w, v) in enumerate(zip(WORDS, WORDS[3:] + WORDS[:3]))]
    queries = [(f"q{i}", f"where is the {w}") for i, w in enumerate(WORDS[:8])]
    qrels = [(f"q{i}", f"d{i}", 1) for i in range(8)] + [(f"q{i}", f"d{(i + 3) % 14}", 2) for i in range(8)]
    return write_beir(tmp_path / "small-beir", corpus, queries, qrels)


def test_evaluate_gives_intervals_and_items_and_prompts_reach_each_role(project, tmp_path):
    folder = small_folder(tmp_path)
    register_file_task("small-beir", folder, kind="retrieval", instruction="Find the place")
    plain = benchharness.evaluate(HashEncoder("hash", dim=8), "small-beir")
    [result] = plain
    items = plain.items(result)
    assert items.kind == "ranking" and len(items.items["ndcg@10"]) == 8
    assert result.main_metric == "ndcg@10"
    assert result.main_score == pytest.approx(100 * items.items["ndcg@10"].mean(), abs=1e-9)
    low, high = result.confidence["main"]
    assert low <= result.main_score <= high and low < high
    assert result.protocol["instruction"] == "Find the place"

    prompted = HashEncoder("prompted", dim=8)
    prompted.prompts = Prompts(query="query: ", document="passage: ")
    [again] = benchharness.evaluate(prompted, "small-beir")
    encoded = {s for call in prompted.calls for s in call}
    task = loaded("small-beir")
    # an encoder with prompts gets the task's instruction on the query side, its document prompt on the other
    assert {f"Find the place{q}" for q in task.data.queries} | {f"passage: {d}" for d in task.data.documents} == encoded
    assert again.main_score != result.main_score


def test_retrieval_and_reranking_run_compare_and_rank_through_the_cli(project, tmp_path_factory, capsys):
    from benchharness.cli import main

    files = tmp_path_factory.mktemp("researcher-files")
    small_folder(files)
    write_reranking(files / "rerank.jsonl", reranking_lines())
    rel = os.path.relpath(files, project)
    (project / "benchharness.toml").write_text(
        '[paths]\ncache_dir = ".cache"\n\n'
        f'[tasks.my-beir]\nkind = "retrieval"\nfolder = "{rel}/small-beir"\n\n'
        f'[tasks.my-rerank]\nkind = "reranking"\nfile = "{rel}/rerank.jsonl"\n'
    )
    assert main(["list", "tasks"]) == 0
    listed = capsys.readouterr().out
    assert table_rows(listed, "my-beir")[0][1:6] == ["files", "test", "ndcg@10", "file-beir-retrieval-cosine", "8"]
    assert table_rows(listed, "my-rerank")[0][1:6] == ["files", "all", "map", "file-reranking-cosine", "30"]

    for encoder in ("glove-50d", "glove-50d+whitening"):
        assert main(["run", "--encoders", encoder, "--tasks", "files", "--quiet", "--no-cache"]) == 0
    stored = json.loads((project / "results" / "glove-50d" / "my-beir.json").read_text())
    assert stored["main_metric"] == "ndcg@10" and stored["items"]["n"] == 8
    assert sorted(stored["data"]["files"]) == ["corpus.jsonl", "queries.jsonl", "test.tsv"]
    assert stored["confidence"]["main"][0] <= stored["main_score"] <= stored["confidence"]["main"][1]
    capsys.readouterr()
    assert main(["compare", "glove-50d", "glove-50d+whitening", "--tasks", "files"]) == 0
    out = capsys.readouterr().out
    whitened = json.loads((project / "results" / "glove-50d+whitening" / "my-beir.json").read_text())["main_score"]
    assert table_rows(out, "my-beir")[0][1:4] == [
        f"{stored['main_score']:.2f}",
        f"{whitened:.2f}",
        f"{stored['main_score'] - whitened:+.2f}",
    ]
    assert table_rows(out, "my-rerank")
    assert main(["leaderboard"]) == 0
    board = capsys.readouterr().out.split("## Tasks from files")[1]
    header = next(line for line in board.splitlines() if line.startswith("| Encoder"))
    assert [c.strip() for c in header.strip("|").split("|")][2:] == ["my-beir", "my-rerank"]
    assert table_rows(board, "glove-50d")[0][2] == f"{stored['main_score']:.2f}"
    assert main(["report", "--out", "report", "--no-published"]) == 0
    page = (project / "report" / "index.html").read_text()
    assert "my-beir" in page and "my-rerank" in page and f"{stored['main_score']:.2f}" in page


def table_rows(text: str, first: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first} ")
    ]


def test_a_binary_index_rescored_by_the_float_query_scores_as_pytrec_eval_on_that_ranking(tmp_path):
    """``search = "binary"`` with ``rescore = 2``: 200 candidates by Hamming distance cover this
    150-document corpus, so the ranking is every document by the float query against its sign
    bits, computed here with numpy and scored by pytrec_eval."""
    folder, corpus, queries, qrels = random_folder(tmp_path)
    register_file_task("my-beir-binary", folder, kind="retrieval", search="binary", rescore=2)
    task = loaded("my-beir-binary")
    encoder = HashEncoder(dim=64)
    evaluation = task.evaluate_items(lambda sentences, role=None: encoder.encode(sentences), 1111)

    scored = task.data.query_ids
    q = encoder.encode([dict(queries)[i] for i in scored]).astype(np.float64)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    bits = (encoder.encode(task.data.documents) > 0).astype(np.float64)
    rescored = q @ bits.T
    top = -np.sort(-rescored, axis=1)[:, :101]
    assert np.diff(-top, axis=1).min() > 1e-6  # no ties: any rule gives this order
    qrels_dict: dict[str, dict[str, int]] = {}
    for query, d, s in qrels:
        qrels_dict.setdefault(query, {})[d] = s
    run = {i: {d: float(c) for (d, _, _), c in zip(corpus, row)} for i, row in zip(scored, rescored)}
    run100 = {i: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:100]) for i, docs in run.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels_dict, {"ndcg_cut.10", "map_cut.100"}).evaluate(run100)
    np.testing.assert_allclose(evaluation.items["ndcg@10"], [full[i]["ndcg_cut_10"] for i in scored], atol=1e-6)
    np.testing.assert_allclose(evaluation.items["map@100"], [full[i]["map_cut_100"] for i in scored], atol=1e-6)
    assert evaluation.metrics["index_bytes"] == 150 * 8  # 64 bits a document
    assert "Hamming" in task.metadata.protocol_details["similarity"]
    assert "x 2 rescored by the float query" in task.metadata.protocol_details["similarity"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"search": "int4"}, "search 'int4'; use float32, int8, binary"),
        ({"rescore": 4}, 'rescore 4; give a whole number of at least 1, with search = "int8" or "binary"'),
        ({"search": "int8", "rescore": 0}, "rescore 0; give a whole number"),
    ],
)
def test_a_search_setting_the_index_cannot_take_is_refused_in_one_line(tmp_path, options, message):
    folder, *_ = random_folder(tmp_path)
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        register_file_task("bad-search", folder, kind="retrieval", **options)
