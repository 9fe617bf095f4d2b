"""The vectors family: rows computed elsewhere, served by sentence and role, scored exactly as the
encoder that computed them; every defect of the files refused in one line naming the place."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

import benchharness
from benchharness.core.digests import sha256_file
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY, Role
from benchharness.encoders.vectors.encoder import MissingVectorsError, PrecomputedVectors
from benchharness.encoders.vectors.layout import SENTENCES, VECTORS
from benchharness.encoders.vectors.writer import jsonl_line, sentence_records
from tests.fakes import HashEncoder
from tests.vector_fakes import DOCUMENTS, PAIRS, QUERIES, PairTask, RoleHashEncoder, SearchTask, role_of


def write_folder(folder, tasks, encoder) -> list[dict]:
    """What a user does: the sentences of ``tasks``, each line encoded by ``encoder`` in its role."""
    records = sentence_records(tasks)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SENTENCES).write_text("".join(jsonl_line(r) for r in records), encoding="utf-8")
    np.save(folder / VECTORS, encode_records(records, encoder))
    return records


def encode_records(records, encoder) -> np.ndarray:
    return np.concatenate([encoder.encode_role([r["text"]], role_of(r)) for r in records]).astype(np.float32)


def scores(results) -> dict[str, dict]:
    return {r.task: r.metrics for r in results.results}


def test_records_hold_each_sentence_once_per_role_with_the_query_instruction():
    records = sentence_records([PairTask(), SearchTask()])
    pair_texts = list(dict.fromkeys(s for a, b, _ in PAIRS for s in (a, b)))
    expected = (
        [{"text": t, "role": "default"} for t in pair_texts]
        + [{"text": t, "role": "query", "instruction": "Find the answer"} for t in QUERIES]
        + [{"text": t, "role": "document"} for t in DOCUMENTS]
    )
    assert records == expected
    # "a man plays a guitar" is a pair sentence, a query and a document: three lines
    assert sum(r["text"] == "a man plays a guitar" for r in records) == 3


def test_round_trip_scores_equal_the_encoders_own_exactly(tmp_path):
    """A symmetric fake and a role-aware fake: the vectors they wrote give their scores to the last bit,
    with and without the embedding cache (whose keys for the roles must keep them apart)."""
    tasks = [PairTask(), SearchTask()]
    for encoder in (HashEncoder(), RoleHashEncoder()):
        folder = tmp_path / encoder.identity
        write_folder(folder, tasks, encoder)
        own = scores(benchharness.evaluate(encoder, tasks))
        served = scores(benchharness.evaluate(f"vectors:{folder}", tasks))
        cached = scores(benchharness.evaluate(f"vectors:{folder}", tasks, cache_dir=tmp_path / "cache"))
        again = scores(benchharness.evaluate(f"vectors:{folder}", tasks, cache_dir=tmp_path / "cache"))
        assert served == own and cached == own and again == own
        assert set(own) == {"VecPairs", "VecSearch"}
    # the role-aware fake gave a query other vectors than the same text as a document
    role_aware = PrecomputedVectors("v", tmp_path / RoleHashEncoder().identity)
    assert role_aware.role_aware
    q, d = (role_aware.encode_role(["a man plays a guitar"], r) for r in (SearchTask().query_role, DOCUMENT))
    assert not np.array_equal(q, d)


def test_a_file_of_default_rows_answers_every_role(tmp_path):
    encoder = HashEncoder()
    texts = list(dict.fromkeys([*QUERIES, *DOCUMENTS]))
    (tmp_path / SENTENCES).write_text("".join(jsonl_line({"text": t, "role": "default"}) for t in texts))
    np.save(tmp_path / VECTORS, encoder.encode(texts))
    vectors = PrecomputedVectors("v", tmp_path)
    assert not vectors.role_aware and vectors.vector_key(QUERY) == vectors.vector_key(DOCUMENT) == ""
    np.testing.assert_array_equal(vectors.encode_role(DOCUMENTS, DOCUMENT), encoder.encode(DOCUMENTS))
    assert scores(benchharness.evaluate(f"vectors:{tmp_path}", [SearchTask()])) == scores(
        benchharness.evaluate(encoder, [SearchTask()])
    )


def test_a_missing_sentence_fails_the_tasks_in_one_line_naming_it(tmp_path):
    records = write_folder(tmp_path, [PairTask()], HashEncoder())
    vectors = np.load(tmp_path / VECTORS)
    gone = next(i for i, r in enumerate(records) if r["text"] == "it rains in paris")
    (tmp_path / SENTENCES).write_text("".join(jsonl_line(r) for i, r in enumerate(records) if i != gone))
    np.save(tmp_path / VECTORS, np.delete(vectors, gone, axis=0))
    results = benchharness.evaluate(f"vectors:{tmp_path}", [PairTask()], errors="keep")
    assert results.results == []
    (failed,) = results.failed
    assert "\n" not in failed.message
    assert f"no vector for 1 of {len(records)} sentences asked for: 'it rains in paris'" in failed.message
    assert str(tmp_path) in failed.message and "benchharness sentences" in failed.message


def test_vectors_are_not_cached_and_the_error_counts_the_whole_pass(tmp_path):
    """Through a run with an embedding cache: no cache folder for rows already on disk, and the
    missing count is the pass's, not one cache chunk's."""
    folder = tmp_path / "vectors"
    folder.mkdir()
    records = write_folder(folder, [PairTask()], HashEncoder())
    keep = records[:1]
    (folder / SENTENCES).write_text("".join(jsonl_line(r) for r in keep))
    np.save(folder / VECTORS, np.load(folder / VECTORS)[:1])
    results = benchharness.evaluate(f"vectors:{folder}", [PairTask()], errors="keep", cache_dir=tmp_path / "cache")
    (failed,) = results.failed
    unique = len({r["text"] for r in records})
    assert f"no vector for {unique - 1} of {unique} sentences asked for" in failed.message
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_role_is_answered_by_its_own_rows_only(tmp_path):
    """With roles in the file, a query is never served the row of the same text as a document."""
    write_folder(tmp_path, [SearchTask()], RoleHashEncoder())
    vectors = PrecomputedVectors("v", tmp_path)
    with pytest.raises(MissingVectorsError, match=r"1 of 1 sentences asked for as query: 'an unrelated title'"):
        vectors.encode_role(["an unrelated title"], QUERY)
    # a query of another instruction is another request
    with pytest.raises(MissingVectorsError, match=r"as query \(instruction 'other'\)"):
        vectors.encode_role([QUERIES[0]], Role("query", "other"))
    many = [f"sentence {i}" for i in range(5)]
    with pytest.raises(MissingVectorsError, match=r"5 of 5 .*'sentence 0', 'sentence 1', 'sentence 2' and 2 more"):
        vectors.encode_role(many, DEFAULT)


def test_wrong_row_count_nan_and_bad_arrays_are_refused_naming_the_file(tmp_path):
    records = write_folder(tmp_path, [PairTask()], HashEncoder())
    good = np.load(tmp_path / VECTORS)
    n = len(records)
    np.save(tmp_path / VECTORS, good[:-1])
    with pytest.raises(InvalidInputError, match=rf"vectors.npy: {n - 1} rows for the {n} lines of .*sentences.jsonl"):
        PrecomputedVectors("v", tmp_path)
    bad = good.copy()
    bad[4, 2] = np.nan
    np.save(tmp_path / VECTORS, bad)
    with pytest.raises(
        InvalidInputError, match=rf"row 4 \(sentences.jsonl line 5, {records[4]['text']!r}\).*not finite"
    ):
        PrecomputedVectors("v", tmp_path)
    np.save(tmp_path / VECTORS, good.astype(np.float64) * 1e39)  # finite in float64, infinite as float32
    with pytest.raises(InvalidInputError, match=r"row 0 .*not finite"):
        PrecomputedVectors("v", tmp_path)
    np.save(tmp_path / VECTORS, np.arange(n * 3).reshape(n, 3))
    with pytest.raises(InvalidInputError, match=rf"shape \({n}, 3\) of int64; expected a float array"):
        PrecomputedVectors("v", tmp_path)
    np.save(tmp_path / VECTORS, np.array([object()] * n), allow_pickle=True)
    with pytest.raises(InvalidInputError, match=r"not a float array saved by numpy\.save"):
        PrecomputedVectors("v", tmp_path)
    # the failure of a bad file is contained like any broken encoder's: the tasks fail with its message
    results = benchharness.evaluate(f"vectors:{tmp_path}", [PairTask()], errors="keep")
    assert "not a float array" in results.failed[0].message
    (tmp_path / VECTORS).unlink()
    with pytest.raises(MissingFileError, match=r"vectors\.npy not found; encode the lines of"):
        PrecomputedVectors("v", tmp_path)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"text": "a", "role": "queries"}', "role 'queries'; use default, query or document"),
        ('{"text": 3}', "'text' must be a string, not int"),
        ('{"text": "a", "role": "document", "instruction": "x"}', "an instruction is given to a query only"),
        ('["a"]', "a JSON list; expected one object per line"),
        ('{"text": "a"', "not JSON"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, problem):
    (tmp_path / SENTENCES).write_text(f'{{"text": "first"}}\n{line}\n{{"text": "last"}}\n')
    np.save(tmp_path / VECTORS, np.ones((3, 2), np.float32))
    with pytest.raises(InvalidInputError) as err:
        PrecomputedVectors("v", tmp_path)
    assert str(err.value).startswith(f"{tmp_path / SENTENCES}:2: ") and problem in str(err.value)


def test_a_repeated_sentence_and_role_is_refused(tmp_path):
    (tmp_path / SENTENCES).write_text(
        '{"text": "a"}\n{"text": "a", "role": "query"}\n{"text": "a", "role": "default"}\n'
    )
    np.save(tmp_path / VECTORS, np.ones((3, 2), np.float32))
    with pytest.raises(InvalidInputError, match=r"sentences.jsonl:3: repeats .*sentences.jsonl:1 \('a' as default\)"):
        PrecomputedVectors("v", tmp_path)


def test_text_with_line_separators_stays_on_one_line(tmp_path):
    texts = ["one\u2028two", "three\nfour", "caf\u00e9 \x85 end", "tab\there"]
    lines = "".join(jsonl_line({"text": t}) for t in texts)
    assert lines.count("\n") == len(texts) and len(lines.splitlines()) == len(texts)
    (tmp_path / SENTENCES).write_text(lines, encoding="utf-8")
    np.save(tmp_path / VECTORS, HashEncoder().encode(texts))
    np.testing.assert_array_equal(PrecomputedVectors("v", tmp_path).encode(texts), HashEncoder().encode(texts))


def test_identity_is_the_contents_of_both_files_not_their_place(tmp_path):
    write_folder(tmp_path / "a", [PairTask()], HashEncoder())
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    first = PrecomputedVectors("v", tmp_path / "a")
    assert first.identity_info()["sha256"] == [sha256_file(tmp_path / "a" / name) for name in (SENTENCES, VECTORS)]
    assert PrecomputedVectors("w", tmp_path / "b").identity == first.identity
    write_folder(tmp_path / "b", [PairTask()], HashEncoder(salt="other"))  # same lines, other vectors
    assert PrecomputedVectors("w", tmp_path / "b").identity != first.identity


def keyed_rows(tasks, encoder) -> list[dict]:
    records = sentence_records(tasks)
    vectors = encode_records(records, encoder)
    return [{**r, "vector": v.tolist()} for r, v in zip(records, vectors)]


def test_a_keyed_jsonl_file_scores_as_the_folder(tmp_path):
    tasks = [PairTask(), SearchTask()]
    encoder = RoleHashEncoder()
    path = tmp_path / "vectors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in reversed(keyed_rows(tasks, encoder))))  # any order
    assert scores(benchharness.evaluate(f"vectors:{path}", tasks)) == scores(benchharness.evaluate(encoder, tasks))
    rows = keyed_rows(tasks, encoder)
    rows[1]["vector"] = rows[1]["vector"][:-1]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InvalidInputError, match=r"vectors.jsonl:2: 7 values, but .*vectors.jsonl:1 has 8"):
        PrecomputedVectors("v", path)
    rows[1]["vector"] = [float("nan")] * 8
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InvalidInputError, match=r"vectors.jsonl:2: the vector is not finite"):
        PrecomputedVectors("v", path)


def test_a_parquet_file_scores_as_the_folder(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    tasks = [PairTask(), SearchTask()]
    encoder = RoleHashEncoder()
    rows = keyed_rows(tasks, encoder)
    path = tmp_path / "vectors.parquet"
    table = pa.table(
        {
            "text": [r["text"] for r in rows],
            "role": [r["role"] for r in rows],
            "instruction": [r.get("instruction") for r in rows],
            "vector": pa.array([r["vector"] for r in rows], pa.list_(pa.float32())),
        }
    )
    pq.write_table(table, path)
    assert scores(benchharness.evaluate(f"vectors:{path}", tasks)) == scores(benchharness.evaluate(encoder, tasks))
    pq.write_table(table.drop_columns(["vector"]), path)
    with pytest.raises(InvalidInputError, match="no column 'vector'"):
        PrecomputedVectors("v", path)
    ragged = table.set_column(3, "vector", pa.array([[1.0, 2.0]] * 3 + [[1.0]] + [[1.0, 2.0]] * (len(rows) - 4)))
    pq.write_table(ragged, path)
    with pytest.raises(InvalidInputError, match=r"vectors.parquet row 3: 1 values, but row 0 has 2"):
        PrecomputedVectors("v", path)


def test_parquet_without_pyarrow_names_the_package(tmp_path, monkeypatch):
    path = tmp_path / "v.parquet"
    path.write_bytes(b"PAR1")
    for module in ("pyarrow", "pyarrow.parquet", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, module, None)  # import then raises ImportError
    with pytest.raises(
        InvalidInputError,
        match=r"v.parquet: reading a .parquet file needs the pyarrow package "
        r"\(pip install pyarrow\)",
    ):
        PrecomputedVectors("v", path)


def test_the_spec_is_checked_before_anything_is_read(tmp_path):
    from benchharness.evaluation.resolver import Resolver

    resolver = Resolver()
    with pytest.raises(MissingFileError, match=r"sentences\.jsonl not found; write it with `benchharness sentences"):
        resolver.check(f"vectors:{tmp_path}")
    (tmp_path / "v.csv").write_text("text,vector\n")
    with pytest.raises(InvalidInputError, match=r"neither a folder nor a \.jsonl or \.parquet file"):
        resolver.check(f"vectors:{tmp_path / 'v.csv'}")


@pytest.mark.parametrize("layout", ["C", "F", "float16"])
def test_the_check_reads_the_array_a_block_at_a_time_in_any_layout(tmp_path, monkeypatch, layout):
    """Blocks of two rows (8-d float32): a NaN in a late block is found at its row, whatever the
    array's order or float width; the rows served are the array's."""
    import benchharness.encoders.vectors.readers as module

    monkeypatch.setattr(module, "CHECK_BYTES", 64)
    records = write_folder(tmp_path, [PairTask()], HashEncoder())
    good = np.load(tmp_path / VECTORS)
    array = {"C": good, "F": np.asfortranarray(good), "float16": good.astype(np.float16)}[layout]
    np.save(tmp_path / VECTORS, array)
    blocks = list(module._blocks(np.load(tmp_path / VECTORS, mmap_mode="r")))
    step = 64 // (8 * array.dtype.itemsize)
    assert [start for start, _ in blocks] == list(range(0, len(records), step))
    np.testing.assert_array_equal(np.concatenate([rows for _, rows in blocks]), array)
    served = PrecomputedVectors("v", tmp_path).encode([r["text"] for r in records])
    np.testing.assert_array_equal(served, array.astype(np.float32))
    array = array.copy(order="K")
    array[9, 7] = np.inf
    np.save(tmp_path / VECTORS, array)
    with pytest.raises(InvalidInputError, match=r"vectors.npy: row 9 \(sentences.jsonl line 10"):
        PrecomputedVectors("v", tmp_path)
