"""One JSON-lines reader (``benchharness.data.readers.json_lines``) for every format: a BEIR corpus
and its queries, a task declared from a ``.jsonl`` file, a ``vectors:`` file and NLI training
data read a file with a byte-order mark and blank lines as the same file without them, and name
the file and line of a line that is not one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchharness import tasks
from benchharness.core.data_root import DataError, DataRoot
from benchharness.core.errors import InvalidInputError, UserError
from benchharness.data.readers import json_lines
from benchharness.encoders.vectors.readers import read_jsonl
from benchharness.tasks.files import declarations
from benchharness.tasks.files.beir import read_corpus, read_queries
from benchharness.tasks.files.declarations import register_file_task
from benchharness.training.train_data import read_nli_jsonl
from tests.helpers import DATA

BOM = "\ufeff"


def write(path: Path, records: list[dict], *, bom: bool = False, blanks: bool = False) -> Path:
    """The records one a line; with a BOM before the first, and blank lines (empty, spaces, CRLF) among them."""
    lines = [json.dumps(r) for r in records]
    if blanks:
        lines = ["", *[x for line in lines for x in (line, "   ", "\r")], ""]
    path.write_text((BOM if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return path


FORMATS = {
    "beir corpus": (
        [{"_id": "d1", "title": "", "text": "one"}, {"_id": "d2", "title": "t", "text": "two"}],
        read_corpus,
        DataError,
    ),
    "beir queries": (  # the texts by id (its other half is each query's line, which blank lines move)
        [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}],
        lambda p: read_queries(p)[1],
        DataError,
    ),
    "vectors": (
        [{"text": "a", "vector": [1.0, 2.0]}, {"text": "b", "role": "query", "vector": [3.0, 4.0]}],
        lambda p: (read_jsonl(p).rows, read_jsonl(p).vectors.tolist()),
        InvalidInputError,
    ),
    "nli": (
        [{"sentence1": "a man", "sentence2": "a person", "gold_label": "entailment"}] * 2,
        read_nli_jsonl,
        DataError,
    ),
}


@pytest.mark.parametrize("name", FORMATS)
def test_a_bom_and_blank_lines_read_as_the_plain_file(tmp_path, name):
    records, read, _ = FORMATS[name]
    plain = read(write(tmp_path / "plain.jsonl", records))
    assert read(write(tmp_path / "marked.jsonl", records, bom=True, blanks=True)) == plain


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize(("bad", "says"), [('{"_id": "x"', "not JSON"), ('["x"]', "a JSON list"), ("7", "a JSON int")])
def test_a_line_that_is_not_one_object_is_named_by_file_and_line(tmp_path, name, bad, says):
    records, read, error = FORMATS[name]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(records[0]) + "\n\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(error) as raised:
        read(path)
    assert str(raised.value).startswith(f"{path}:3: {says}")


def test_a_declared_task_file_reads_by_the_same_rules(tmp_path, monkeypatch):
    monkeypatch.setattr(declarations, "REGISTERED", {})
    pairs = [{"sentence1": f"a {i}", "sentence2": f"b {i}", "score": float(i)} for i in range(5)]
    register_file_task("plain-pairs", write(tmp_path / "plain.jsonl", pairs))
    register_file_task("marked-pairs", write(tmp_path / "marked.jsonl", pairs, bom=True, blanks=True))
    plain, marked = tasks.get("plain-pairs"), tasks.get("marked-pairs")
    plain.load(DataRoot(DATA))
    marked.load(DataRoot(DATA))
    assert marked.sentences() == plain.sentences() and len(plain.sentences()) == 10
    (tmp_path / "bad.jsonl").write_text(json.dumps(pairs[0]) + "\n[1]\n")
    register_file_task("bad-pairs", tmp_path / "bad.jsonl")
    with pytest.raises(DataError, match=r"bad\.jsonl:2: a JSON list; expected one object per line"):
        tasks.get("bad-pairs").load(DataRoot(DATA))


def test_undecodable_bytes_are_named_by_line(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(UserError, match=r"latin\.jsonl:2: byte b'\\xe9' is not valid utf-8"):
        list(json_lines(path))
