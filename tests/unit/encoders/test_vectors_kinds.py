"""A sparse model's rows and a multi-vector model's token vectors computed elsewhere, served by
``vectors:DIR`` to their kind's view: the scores of SICK-R trial and of a BEIR folder equal those
computed by hand from the same rows (dot products, cosines, MaxSim; scipy's Spearman and Pearson;
nDCG@10 and MRR@10 by their formulas), each role answered by its own rows, and every defect of
the files refused in one line naming the file."""

from __future__ import annotations

import json
import re
import shutil
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import pearsonr, spearmanr

import benchharness
from benchharness import tasks
from benchharness.core.data_root import DataRoot
from benchharness.core.digests import sha256_file
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.prompts import DEFAULT, DOCUMENT, Role
from benchharness.encoders.vectors.encoder import MissingVectorsError, PrecomputedVectors, open_vectors
from benchharness.encoders.vectors.kind_encoders import PrecomputedSparse, PrecomputedTokens
from benchharness.encoders.vectors.layout import (
    SENTENCES,
    SENTENCES_DIGEST,
    SIMILARITY,
    SPARSE_VECTORS,
    TOKEN_OFFSETS,
    TOKENS,
    VECTORS,
)
from benchharness.encoders.vectors.writer import jsonl_line, sentence_records
from benchharness.tasks.files import declarations
from benchharness.tasks.files.declarations import register_file_task
from tests.vector_fakes import role_of

SICK = "SICKRelatedness-trial"
BEIR = "VecKindsBEIR"
INSTRUCTION = "Find the passage that answers"
CORPUS = [
    "a man plays a guitar on a stage",
    "the recipe needs two onions and garlic",
    "stock markets fell sharply on monday",
    "a kitten sleeps on a warm sofa",
    "heavy rain floods the streets of paris",
    "children read books in the library",
    "the band played loud music all night",
    "a chef slices vegetables quickly",
]
QUERIES = {
    "q0": ("who is playing music", {"d0", "d6"}),
    "q1": ("cooking with onions", {"d1", "d7"}),
    "q2": ("weather in paris", {"d4"}),
    "q3": ("where do kids read", {"d5"}),
}
LETTERS = "abcdefghijklmnopqrstuvwxyz"
DIMENSION = 8


@pytest.fixture
def beir(tmp_path, monkeypatch):
    """A BEIR folder with an instruction for its queries, declared as a retrieval task."""
    monkeypatch.setattr(declarations, "REGISTERED", {})
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(CORPUS))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _) in QUERIES.items())
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, rel) in QUERIES.items() for d in rel)
    )
    register_file_task(BEIR, folder, kind="retrieval", instruction=INSTRUCTION)
    return BEIR


def loaded(names, data_dir):
    found = [tasks.get(name) for name in names]
    for task in found:
        task.load(DataRoot(data_dir))
    return found


def _salt(role: Role) -> int:
    return zlib.crc32(f"{role.name}|{role.instruction}".encode())


def sparse_row(text: str, role: Role) -> np.ndarray:
    """What the model elsewhere gives: letter counts weighted per role (and instruction), float32."""
    weights = np.random.default_rng(_salt(role)).uniform(0.5, 1.5, len(LETTERS))
    return (np.array([text.lower().count(c) for c in LETTERS]) * weights).astype(np.float32)


def token_rows(text: str, role: Role) -> np.ndarray:
    """One vector per word: the word's own, nudged per role (and instruction), float32."""
    rows = []
    for word in text.lower().split():
        base = np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIMENSION)
        nudge = np.random.default_rng([zlib.crc32(word.encode()), _salt(role)]).standard_normal(DIMENSION)
        rows.append(base + 0.3 * nudge)
    return np.array(rows, dtype=np.float32).reshape(-1, DIMENSION)


def write_lines(folder, task_list) -> list[dict]:
    records = sentence_records(task_list)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SENTENCES).write_text("".join(jsonl_line(r) for r in records), encoding="utf-8")
    return records


def write_sparse(folder, records) -> None:
    sp.save_npz(folder / SPARSE_VECTORS, sp.csr_matrix(np.stack([sparse_row(r["text"], role_of(r)) for r in records])))


def write_tokens(folder, records) -> None:
    matrices = [token_rows(r["text"], role_of(r)) for r in records]
    np.save(folder / TOKENS, np.concatenate(matrices))
    np.save(folder / TOKEN_OFFSETS, np.concatenate([[0], np.cumsum([len(m) for m in matrices])]).astype(np.int64))


def dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(a.astype(np.float64) @ b.astype(np.float64))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The dot product of the unit rows, held as float32 as every row is (pairs of one letter multiset
    then tie as the view ties them: Spearman moves with ties broken by float32 rounding)."""
    return dot(*((x / np.linalg.norm(x.astype(np.float64))).astype(np.float32) for x in (a, b)))


def maxsim(query: np.ndarray, document: np.ndarray, mean: bool = False) -> float:
    """Each query token's best dot product with any document token, summed (over the query's count)."""
    total = sum(max(dot(q, d) for d in document) for q in query)
    return total / len(query) if mean else total


def sts_expected(data_dir, score) -> dict[str, float]:
    """SICK-R trial's Spearman and Pearson (x100) of ``score(left, right)`` on the default role's rows."""
    (sick,) = loaded([SICK], data_dir)
    a, b, gold = sick.subsets["test"]
    scores = [score(x, y) for x, y in zip(a, b)]
    return {"spearman": 100 * spearmanr(scores, gold).statistic, "pearson": 100 * pearsonr(scores, gold).statistic}


def retrieval_expected(score) -> dict[str, float]:
    """nDCG@10 and MRR@10 (x100) of the ranking by ``score(query, document)``, ties in corpus order."""
    ndcg, mrr = [], []
    for text, relevant in QUERIES.values():
        ranked = sorted(range(len(CORPUS)), key=lambda d: (-score(text, CORPUS[d]), d))[:10]
        hits = [f"d{d}" in relevant for d in ranked]
        ideal = sum(1 / np.log2(r + 2) for r in range(min(len(relevant), 10)))
        ndcg.append(sum(1 / np.log2(r + 2) for r, hit in enumerate(hits) if hit) / ideal)
        mrr.append(next((1 / (r + 1) for r, hit in enumerate(hits) if hit), 0.0))
    return {"ndcg@10": 100 * np.mean(ndcg), "mrr@10": 100 * np.mean(mrr)}


def metrics(folder, names, data_dir, **options) -> dict[str, dict]:
    results = benchharness.evaluate(f"vectors:{folder}", names, data_dir=data_dir, intervals=False, **options)
    assert not results.failed, results.failed
    return {r.task: r for r in results.results}


def assert_close(found: dict, expected: dict) -> None:
    """Equal but for float32 rounding: the view sums float32 products (and normalises in float32),
    the hand in float64, which moves a Pearson of unit rows by about 1e-5 (x100)."""
    for name, value in expected.items():
        assert found[name] == pytest.approx(value, abs=1e-4), name


QUERY_ROLE = Role("query", INSTRUCTION)


def test_sparse_rows_score_sts_and_retrieval_as_their_dot_products(tmp_path, data_dir, beir):
    folder = tmp_path / "splade"
    records = write_lines(folder, loaded([SICK, BEIR], data_dir))
    write_sparse(folder, records)
    scored = metrics(folder, [SICK, BEIR], data_dir)
    assert_close(
        scored[SICK].metrics, sts_expected(data_dir, lambda a, b: dot(sparse_row(a, DEFAULT), sparse_row(b, DEFAULT)))
    )
    assert_close(
        scored[BEIR].metrics,
        retrieval_expected(lambda q, d: dot(sparse_row(q, QUERY_ROLE), sparse_row(d, DOCUMENT))),
    )
    documents = np.stack([sparse_row(d, DOCUMENT) for d in CORPUS])
    assert scored[BEIR].metrics["corpus_active_dims"] == pytest.approx((documents > 0).sum(1).mean())
    assert scored[BEIR].metrics["index_bytes"] == 8 * (documents > 0).sum() + 4 * (len(CORPUS) + 1)
    assert scored[BEIR].protocol["model_kind"] == "sparse"
    assert scored[SICK].encoder_identity["kind"] == "sparse"
    # each role is answered by its own rows: a query's row is the query role's, with the instruction
    model = open_vectors("v", folder)
    assert isinstance(model, PrecomputedSparse) and model.role_aware and model.vocabulary_size == len(LETTERS)
    (text, _) = QUERIES["q0"]
    np.testing.assert_array_equal(model.encode_sparse([text], QUERY_ROLE).toarray()[0], sparse_row(text, QUERY_ROLE))
    with pytest.raises(MissingVectorsError, match=r"as query \(instruction 'other'\)"):
        model.encode_sparse([text], Role("query", "other"))

    # cosine when similarity.json says so, under another identity
    (folder / SIMILARITY).write_text('{"similarity": "cosine"}')
    again = metrics(folder, [SICK], data_dir)[SICK]
    assert again.encoder_identity["hash"] != scored[SICK].encoder_identity["hash"]
    assert again.encoder_metadata["similarity"] == "cosine"
    assert_close(
        again.metrics, sts_expected(data_dir, lambda a, b: cosine(sparse_row(a, DEFAULT), sparse_row(b, DEFAULT)))
    )


def test_token_vectors_score_sts_and_retrieval_by_maxsim(tmp_path, data_dir, beir):
    folder = tmp_path / "colbert"
    records = write_lines(folder, loaded([SICK, BEIR], data_dir))
    write_tokens(folder, records)
    scored = metrics(folder, [SICK, BEIR], data_dir, cache_dir=tmp_path / "cache")
    assert_close(
        scored[SICK].metrics,
        sts_expected(data_dir, lambda a, b: maxsim(token_rows(a, DEFAULT), token_rows(b, DEFAULT))),
    )
    assert_close(
        scored[BEIR].metrics,
        retrieval_expected(lambda q, d: maxsim(token_rows(q, QUERY_ROLE), token_rows(d, DOCUMENT))),
    )
    words = sum(len(d.split()) for d in CORPUS)
    assert scored[BEIR].metrics["index_bytes"] == 4 * words * DIMENSION
    assert scored[BEIR].protocol["model_kind"] == "multi-vector"
    # rows read from files are not copied into the embedding cache (reading the folder again is as cheap)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    model = open_vectors("v", folder)
    assert isinstance(model, PrecomputedTokens) and not model.length_normalized
    served = model.encode_tokens([CORPUS[3], CORPUS[0]], DOCUMENT)
    for text, rows in zip([CORPUS[3], CORPUS[0]], served):
        np.testing.assert_array_equal(rows, token_rows(text, DOCUMENT))

    (folder / SIMILARITY).write_text('{"similarity": "meanmaxsim"}')
    mean = metrics(folder, [SICK], data_dir)[SICK]
    assert_close(
        mean.metrics,
        sts_expected(data_dir, lambda a, b: maxsim(token_rows(a, DEFAULT), token_rows(b, DEFAULT), mean=True)),
    )


def test_a_kind_is_refused_a_task_it_cannot_run_and_a_missing_sentence_fails_its_task(tmp_path, data_dir, beir):
    folder = tmp_path / "splade"
    records = write_lines(folder, loaded([BEIR], data_dir))
    gone = next(i for i, r in enumerate(records) if r["text"] == CORPUS[2])
    (folder / SENTENCES).write_text("".join(jsonl_line(r) for i, r in enumerate(records) if i != gone))
    write_sparse(folder, [r for i, r in enumerate(records) if i != gone])
    results = benchharness.evaluate(f"vectors:{folder}", ["MR", BEIR], data_dir=data_dir, errors="keep")
    assert results.results == []
    refused, missing = sorted(results.failed, key=lambda f: f.task != "MR")
    assert "is a sparse encoder" in refused.message and "MR needs vectors" in refused.message
    assert "\n" not in missing.message
    assert f"{folder} has no vector for 1 of {len(CORPUS)} sentences asked for as document: {CORPUS[2]!r}" in (
        missing.message
    )


def test_identity_is_the_files_contents_and_the_similarity_not_their_place(tmp_path, data_dir):
    folder = tmp_path / "a"
    records = write_lines(folder, loaded([SICK], data_dir))
    write_tokens(folder, records)
    first = open_vectors("v", folder)
    files = [folder / name for name in (SENTENCES, TOKENS, TOKEN_OFFSETS)]
    assert first.identity_info() == {
        "family": "vectors",
        "layout": "folder",
        "sha256": [sha256_file(f) for f in files],
        "similarity": "maxsim",
    }
    assert first.identity_record()["kind"] == "multi-vector"
    shutil.copytree(folder, tmp_path / "b")
    assert open_vectors("w", tmp_path / "b").identity == first.identity
    (tmp_path / "b" / SIMILARITY).write_text('{"similarity": "meanmaxsim"}')
    assert open_vectors("w", tmp_path / "b").identity != first.identity


def sick_folder(tmp_path, data_dir, kind: str):
    folder = tmp_path / kind
    records = write_lines(folder, loaded([SICK], data_dir))
    (write_sparse if kind == "sparse" else write_tokens)(folder, records)
    return folder, records


def test_a_folder_with_two_kinds_of_files_is_refused(tmp_path, data_dir):
    folder, records = sick_folder(tmp_path, data_dir, "sparse")
    np.save(folder / VECTORS, np.ones((len(records), 2), np.float32))
    with pytest.raises(
        InvalidInputError, match=r"more than one kind of model: vectors.npy \(dense\), vectors.npz \(sparse\)"
    ):
        open_vectors("v", folder)
    with pytest.raises(InvalidInputError, match="more than one kind of model"):  # when the spec is checked
        benchharness.evaluate(f"vectors:{folder}", [SICK], data_dir=data_dir, errors="keep")


def test_sparse_rows_misaligned_not_finite_or_not_a_matrix_are_refused_naming_the_file(tmp_path, data_dir):
    folder, records = sick_folder(tmp_path, data_dir, "sparse")
    path = folder / SPARSE_VECTORS
    good = sp.load_npz(path).tocsr()
    n = len(records)
    sp.save_npz(path, good[:-1])
    with pytest.raises(
        InvalidInputError, match=rf"vectors.npz: {n - 1:,} rows for the {n:,} lines of .*sentences.jsonl"
    ):
        open_vectors("v", folder)
    bad = good.copy()
    bad.data[bad.indptr[5]] = np.nan
    sp.save_npz(path, bad)
    with pytest.raises(
        InvalidInputError, match=r"vectors.npz: row 5 \(sentences.jsonl line 6, .*\): a value is not finite"
    ):
        open_vectors("v", folder)
    np.savez(path, good.toarray())  # a dense array in an .npz
    with pytest.raises(InvalidInputError, match=r"vectors.npz: not a sparse matrix saved by scipy.sparse.save_npz"):
        open_vectors("v", folder)
    # a column beyond the width: scipy builds and saves it unchecked
    sp.save_npz(path, sp.csr_matrix((good.data, good.indices + len(LETTERS), good.indptr), shape=good.shape))
    with pytest.raises(InvalidInputError, match=r"vectors.npz: not a well-formed sparse matrix \(indices must be <"):
        open_vectors("v", folder)


def _save_offsets(folder, offsets) -> None:
    np.save(folder / TOKEN_OFFSETS, np.asarray(offsets))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda o: o[:-1], r"token_offsets.npy: {n:,} offsets for the {n:,} lines of .*; save one more than the lines"),
        (lambda o: o + 1, r"token_offsets.npy: starts at 1; the first line's rows start at 0"),
        (
            lambda o: np.concatenate([o[:3], [o[2] - 1], o[4:]]),
            r"token_offsets.npy: offset 3 \(\d+\) is below offset 2",
        ),
        (
            lambda o: np.concatenate([o[:-1], [o[-1] - 1]]),
            r"token_offsets.npy: ends at [\d,]+, but tokens.npy has [\d,]+ rows",
        ),
        (lambda o: o.astype(np.float64), r"token_offsets.npy: shape \(\d+,\) of float64; expected int64"),
    ],
)
def test_a_bad_offsets_array_is_refused_naming_the_file(tmp_path, data_dir, change, problem):
    folder, records = sick_folder(tmp_path, data_dir, "multi-vector")
    _save_offsets(folder, change(np.load(folder / TOKEN_OFFSETS)))
    with pytest.raises(InvalidInputError, match=problem.format(n=len(records))):
        open_vectors("v", folder)


def test_token_files_missing_or_not_finite_are_refused_naming_the_file(tmp_path, data_dir):
    folder, records = sick_folder(tmp_path, data_dir, "multi-vector")
    tokens = np.load(folder / TOKENS)
    offsets = np.load(folder / TOKEN_OFFSETS)
    tokens[offsets[7] + 2, 1] = np.inf
    np.save(folder / TOKENS, tokens)
    where = f"tokens.npy: row {offsets[7] + 2} (token 2 of sentences.jsonl line 8, {records[7]['text']!r}): "
    with pytest.raises(InvalidInputError, match=re.escape(where + "the vector is not finite")):
        open_vectors("v", folder)
    (folder / TOKEN_OFFSETS).unlink()
    with pytest.raises(MissingFileError, match=r"token_offsets.npy not found; save there where each line's rows start"):
        open_vectors("v", folder)
    np.save(folder / TOKEN_OFFSETS, offsets)
    np.save(folder / TOKENS, np.ones(tokens.shape, np.int32))
    with pytest.raises(InvalidInputError, match=r"tokens.npy: shape .* of int32; expected a float array"):
        open_vectors("v", folder)


@pytest.mark.parametrize(
    ("kind", "text", "problem"),
    [
        (
            "sparse",
            '{"similarity": "maxsim"}',
            r"similarity 'maxsim'; a sparse model's outputs are compared by dot or cosine",
        ),
        (
            "multi-vector",
            '{"similarity": "dot"}',
            r"similarity 'dot'; a multi-vector model's outputs are compared by maxsim or meanmaxsim",
        ),
        ("sparse", '{"similarity_fn_name": "dot"}', r'expected \{"similarity": ...\} with one of dot, cosine'),
        ("sparse", "dot", r"not readable JSON"),
    ],
)
def test_a_bad_similarity_file_is_refused(tmp_path, data_dir, kind, text, problem):
    folder, _ = sick_folder(tmp_path, data_dir, kind)
    (folder / SIMILARITY).write_text(text)
    with pytest.raises(InvalidInputError, match=rf"similarity.json: .*{problem}"):
        open_vectors("v", folder)


def test_a_dense_folder_names_no_similarity_and_the_lines_are_checked_against_their_digest(tmp_path, data_dir):
    folder = tmp_path / "dense"
    records = write_lines(folder, loaded([SICK], data_dir))
    np.save(folder / VECTORS, np.ones((len(records), 2), np.float32))
    (folder / SIMILARITY).write_text('{"similarity": "dot"}')
    with pytest.raises(InvalidInputError, match=r"similarity.json: dense vectors are compared by each task's own"):
        PrecomputedVectors("v", folder)
    folder, _ = sick_folder(tmp_path, data_dir, "sparse")
    (folder / SENTENCES_DIGEST).write_text(sha256_file(folder / SENTENCES) + "\n")
    open_vectors("v", folder)
    with open(folder / SENTENCES, "a") as fh:
        fh.write(jsonl_line({"text": "one more", "role": "default"}))
    with pytest.raises(
        InvalidInputError, match=r"sentences.jsonl changed since .*its rows in vectors.npz were computed"
    ):
        open_vectors("v", folder)
