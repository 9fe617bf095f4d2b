"""Reading a BEIR folder: the corpus, the queries and one split's relevance judgements (qrels).

Layout (BEIR's ``GenericDataLoader``, which mteb's retrieval tasks also follow)::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}   one object a line
    queries.jsonl       {"_id": "q1", "text": "..."}
    qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score           after that header line

Conventions, each mteb's (``mteb._create_dataloaders._corpus_to_dict``) or BEIR's:

- a document is ``(title + " " + text).strip()`` when its title is non-empty text, else
  ``text.strip()``; a query is its text as written;
- ids are text (an integer ``_id`` is read as its decimal text, as qrels name it);
- a relevance score is an integer; a document is relevant to a query when its score is above 0,
  and its gain in nDCG is that score (pytrec_eval's ``ndcg_cut``: a score of 0 or below gains 0);
- the queries scored are those that this split's qrels give at least one relevant document, in
  the order of ``queries.jsonl`` (BEIR and mteb score only the queries their qrels name; a query
  whose every judgement is 0 or below, which they keep and score 0 on every metric, is dropped
  here and counted in ``dropped``).

Stricter than BEIR, whose loader silently overwrites or skips: a problem is a ``DataError`` naming
the file and line, and the folder is checked before the corpus is read (a missing qrels file is
said at once, not after a large corpus): a duplicate id, an empty corpus, a line that is not a JSON
object, a missing or empty field, a qrels line naming a query or document that does not exist, two
qrels lines giving one pair different scores.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchharness.core.data_root import DataError
from benchharness.data.readers import excerpt, json_lines, numbered_lines, text_stream

CORPUS, QUERIES, QRELS = "corpus.jsonl", "queries.jsonl", "qrels"
QRELS_HEADER = ["query-id", "corpus-id", "score"]
LAYOUT = "a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class BeirData:
    """A BEIR folder read for one split: the whole corpus and the queries to score."""

    corpus_ids: list[str]
    documents: list[str]  # title + " " + text, as the encoder gets it
    query_ids: list[str]  # the scored queries, in the order of queries.jsonl
    queries: list[str]
    #: per scored query, its relevant documents: corpus index -> relevance score (> 0)
    relevant: list[dict[int, int]]
    #: queries named by the qrels with no relevant document (every score 0 or below)
    dropped: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.queries)


def beir_files(folder: Path, split: str) -> list[Path]:
    """corpus.jsonl, queries.jsonl and qrels/<split>.tsv of ``folder``."""
    return [folder / CORPUS, folder / QUERIES, folder / QRELS / f"{split}.tsv"]


def read_beir(folder: Path, split: str) -> BeirData:
    """The folder's corpus, the queries its ``split`` qrels judge, and their relevant documents."""
    if not folder.is_dir():
        raise DataError(f"{folder}: {'not a folder' if folder.exists() else 'No such folder'} ({LAYOUT})")
    files = beir_files(folder, split)
    for path in files:
        if not path.is_file():
            what = f"the qrels of split {split!r}" if path.parent.name == QRELS else "a required file"
            raise DataError(f"{path}: {'not a file' if path.exists() else 'No such file'} ({what}; {LAYOUT})")
    corpus_ids, documents = read_corpus(files[0])
    query_lines, query_texts = read_queries(files[1])
    judged = read_qrels(files[2], {i: n for n, i in enumerate(corpus_ids)}, query_lines, files[0], files[1])
    kept = [q for q in query_lines if any(score > 0 for score in judged.get(q, {}).values())]
    if not kept:
        raise DataError(f"{files[2]}: no query has a relevant document (a score above 0)")
    scored = set(kept)
    dropped = [q for q in query_lines if q in judged and q not in scored]
    relevant = [{doc: score for doc, score in judged[q].items() if score > 0} for q in kept]
    return BeirData(corpus_ids, documents, kept, [query_texts[q] for q in kept], relevant, dropped, files)


def read_corpus(path: Path) -> tuple[list[str], list[str]]:
    """Ids and document texts (title + " " + text, stripped) in file order."""
    ids: dict[str, int] = {}
    documents: list[str] = []
    for line, record in json_lines(path):
        doc_id = _id(path, line, record, ids)
        text = _text(path, line, record, "text", allow_empty=True)
        title = record.get("title")
        if title is not None and not isinstance(title, str):
            raise DataError(f"{path}:{line}: 'title' is {excerpt(title)}; a title is text (or absent)")
        document = (title + " " + text).strip() if title else text.strip()
        if not document:
            raise DataError(f"{path}:{line}: document {excerpt(doc_id)} has neither title nor text")
        ids[doc_id] = line
        documents.append(document)
    if not documents:
        raise DataError(f"{path}: no documents; the corpus needs at least one")
    return list(ids), documents


def read_queries(path: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Each query id's line, and its text as written."""
    lines: dict[str, int] = {}
    texts: dict[str, str] = {}
    for line, record in json_lines(path):
        query_id = _id(path, line, record, lines)
        texts[query_id] = _text(path, line, record, "text", allow_empty=False)
        lines[query_id] = line
    return lines, texts


def read_qrels(
    path: Path, corpus: dict[str, int], queries: dict[str, int], corpus_path: Path, queries_path: Path
) -> dict[str, dict[int, int]]:
    """Query id -> corpus index -> score; every id must exist, a pair is judged once (or again
    with the same score)."""
    judged: dict[str, dict[int, int]] = {}
    seen: dict[tuple[str, str], tuple[int, int]] = {}  # (query, document) -> (line, score)
    for line, query_id, doc_id, score in qrels_lines(path):
        if query_id not in queries:
            raise DataError(f"{path}:{line}: query id {excerpt(query_id)} is not in {queries_path}")
        if doc_id not in corpus:
            raise DataError(f"{path}:{line}: corpus id {excerpt(doc_id)} is not in {corpus_path}")
        before = seen.setdefault((query_id, doc_id), (line, score))
        if before[1] != score:
            raise DataError(
                f"{path}:{line}: query {excerpt(query_id)} and document {excerpt(doc_id)} are judged {score} here "
                f"and {before[1]} on line {before[0]}"
            )
        judged.setdefault(query_id, {})[corpus[doc_id]] = score
    return judged


def count_scored(path: Path) -> int:
    """How many queries a qrels file gives a relevant document: the scored queries, known without
    reading the corpus (ids are checked when the folder is read)."""
    return len({query_id for _, query_id, _, score in qrels_lines(path) if score > 0})


def qrels_lines(path: Path) -> Iterator[tuple[int, str, str, int]]:
    """(line, query id, corpus id, score) for each judgement, after the header line."""
    header = False
    for line, fields in _tsv_lines(path):
        if line == 1:
            if [f.strip() for f in fields] != QRELS_HEADER:
                raise DataError(
                    f"{path}:1: expected the header {' '.join(QRELS_HEADER)} (tab-separated), "
                    f"got {excerpt(' '.join(fields))}"
                )
            header = True
            continue
        if len(fields) != 3:
            raise DataError(
                f"{path}:{line}: {len(fields)} tab-separated field(s); expected 3 ({', '.join(QRELS_HEADER)})"
            )
        query_id, doc_id, written = (f.strip() for f in fields)
        if not INTEGER.fullmatch(written):
            raise DataError(f"{path}:{line}: score {excerpt(written)} is not an integer")
        yield line, query_id, doc_id, int(written)
    if not header:
        raise DataError(f"{path}:1: empty file; its first line must be the header {' '.join(QRELS_HEADER)}")


def _tsv_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, tab-separated fields) for each non-blank line."""
    with text_stream(path) as fh:
        for line_no, line in numbered_lines(fh, path):
            text = line.rstrip("\r\n")
            if text.strip() or line_no == 1:
                yield line_no, text.split("\t")


def _id(path: Path, line: int, record: dict[str, Any], seen: dict[str, int]) -> str:
    if "_id" not in record:
        raise DataError(f"{path}:{line}: no key '_id'; found {excerpt(', '.join(record)) if record else 'no key'}")
    value = record["_id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise DataError(f"{path}:{line}: '_id' is {excerpt(value)}; an id is non-empty text or an integer")
    doc_id = str(value).strip()
    if doc_id in seen:
        raise DataError(f"{path}:{line}: id {excerpt(doc_id)} again (first on line {seen[doc_id]}); ids must be unique")
    return doc_id


def _text(path: Path, line: int, record: dict[str, Any], key: str, allow_empty: bool) -> str:
    if key not in record:
        raise DataError(f"{path}:{line}: no key {key!r}; found {excerpt(', '.join(record))}")
    value = record[key]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise DataError(
            f"{path}:{line}: {key!r} is {excerpt(value)}; expected {'' if allow_empty else 'non-empty '}text"
        )
    return value
