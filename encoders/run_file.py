"""A TREC run file as a first stage: ``run:<file>`` (``data.trec_run``: ``qid Q0 docid rank score
tag``), each query's list found by the task's query id and its documents by their ids.

Lists computed elsewhere (a BM25 of Pyserini, a production retriever's logs) are scored as they are,
alone or reranked (``run:<file>>>RERANKER?k=K``). The task must name its queries and documents: a
BEIR folder and an mteb retrieval task do (``SearchContext``); a task without ids (QQP) is refused
in one line. The identity is the file's sha256: another file, or the same file edited, is another
first stage.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.digests import sha256_file
from benchharness.core.errors import InvalidInputError, MissingFileError
from benchharness.core.kind_models import SearchModel
from benchharness.core.kinds import (
    RUN_FILE,
    KindMismatchError,
    Ranked,
    SearchRequest,
    SearchView,
    View,
    ViewSettings,
)
from benchharness.core.specs import BuildContext, EncoderSpec, Family, Params
from benchharness.data.readers import excerpt
from benchharness.data.trec_run import RunList, read_trec_run
from benchharness.scoring.ranked_lists import padded


class RunFile(SearchModel):
    """The lists of one TREC run file."""

    model_kind = RUN_FILE
    similarity = "the run file's scores"

    def __init__(self, name: str, file: str | Path) -> None:
        super().__init__(name)
        self.path = Path(file).expanduser()

    @cached_property
    def lists(self) -> dict[str, RunList]:
        return read_trec_run(self.path)

    def identity_info(self) -> dict[str, Any]:
        return {"family": "run", "file": self.path.name, "sha256": sha256_file(self.path)}

    def view(self, settings: ViewSettings) -> View:
        return RunView(self)


class RunView(SearchView):
    """Each query's list of the run, by the task's ids; ``facts`` counts the task's queries the run
    has no list for (their lists are empty)."""

    kind = RUN_FILE

    def __init__(self, run: RunFile) -> None:
        super().__init__(run.name)
        self.run = run

    def _search_in(self, request: SearchRequest) -> Ranked:
        context, exclude = request.context, request.exclude
        if context is None or context.query_ids is None or context.corpus_ids is None:
            raise KindMismatchError(
                f"{self.run.name} finds its lists by query and document ids, and this task names neither "
                "(a BEIR folder and an mteb retrieval task do)"
            )
        lists = self.run.lists
        position = {str(doc): i for i, doc in enumerate(context.corpus_ids)}
        rows, missing = [], 0
        for i, query in enumerate(context.query_ids):
            found = lists.get(str(query))
            if found is None:
                missing += 1
                rows.append((np.zeros(0), np.zeros(0, dtype=np.int64)))
                continue
            banned = -1 if exclude is None else int(exclude[i])
            ids = np.asarray([self._index(position, query, doc, len(request.corpus)) for doc in found.documents])
            keep = ids != banned
            rows.append((np.asarray(found.scores, dtype=np.float64)[keep], ids[keep]))
        if missing == len(rows):
            raise InvalidInputError(
                f"{self.run.path}: no list for any of the task's {len(rows):,} queries (the run's first query id: "
                f"{excerpt(next(iter(lists)))}; the task's: {excerpt(str(context.query_ids[0]))}); "
                "is it a run of another collection?"
            )
        self._facts = {"queries_not_in_run": missing}
        return padded(rows, request.k)

    def _index(self, position: dict[str, int], query: str, document: str, n_corpus: int) -> int:
        found = position.get(document)
        if found is None:
            raise InvalidInputError(
                f"{self.run.path}: query {excerpt(query)} lists document {excerpt(document)}, which the task's "
                f"corpus of {n_corpus:,} documents lacks; is it a run of another collection?"
            )
        return found


def build(name: str, spec: Params, context: BuildContext) -> RunFile:
    return RunFile(name, spec["file"])


def _check(spec: EncoderSpec) -> None:
    path = Path(str(spec.get("file", ""))).expanduser()
    if not path.is_file():
        what = "not a file" if path.exists() else "no such file"
        raise MissingFileError(f"run file {path}: {what} (a TREC run, lines of: qid Q0 docid rank score tag)")


FAMILY = Family.of("run", build, target="file", usage="run:<TREC run file>", accepts=(), check=_check)
