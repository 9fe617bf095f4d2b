"""BM25 by ``bm25s`` (the ``bm25`` extra): ``bm25``, or ``bm25:<method>?k1=..&b=..&delta=..``.

Everything is ``bm25s``'s, with its documented defaults: ``bm25s.tokenize`` (lowercased, words of two
or more word characters, its English stop words, no stemmer) on the corpus and on the queries, and
``bm25s.BM25`` (method ``lucene``, k1 1.5, b 0.75; delta 0.5, used by ``bm25l`` and ``bm25+``). Each
search indexes the corpus it is given (``BM25.index``) and scores every document for each query with
``BM25.get_scores``, the scores ``BM25.retrieve`` ranks; the top list follows the harness's tie rule
(score descending, then corpus order), where ``retrieve``'s partial sort leaves ties in no stated
order. The identity records every setting, the stop words' digest and the library's version. BM25
sees the texts alone: prompts and a task's instruction are not given to it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.kind_models import SearchModel
from benchharness.core.kinds import LEXICAL, Ranked, Roles, SearchView, View, ViewSettings
from benchharness.core.specs import BuildContext, Family, Params
from benchharness.scoring.ranked_lists import best_of_row, padded

#: ``bm25s.BM25``'s scoring methods
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
#: ``bm25s.tokenize``'s settings the identity records (its defaults, which are used)
TOKENIZER_SETTINGS = ("lower", "token_pattern", "stopwords", "stemmer")


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise UserError("bm25 needs the bm25s library; install the extra: pip install 'benchharness[bm25]'") from None
    return bm25s


class BM25(SearchModel):
    """BM25 as ``bm25s`` scores it (see the module's docstring)."""

    model_kind = LEXICAL

    def __init__(self, name: str, method: str = "lucene", k1: float = 1.5, b: float = 0.75, delta: float = 0.5) -> None:
        super().__init__(name)
        if method not in METHODS:
            raise InvalidInputError(f"encoder {name!r}: unknown BM25 method {method!r}; bm25s has {', '.join(METHODS)}")
        for key, value in (("k1", k1), ("b", b), ("delta", delta)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InvalidInputError(f"encoder {name!r}: {key}={value!r}; a BM25 parameter is a number, 0 or more")
        self.bm25s = _bm25s()
        self.method, self.k1, self.b, self.delta = method, float(k1), float(b), float(delta)
        self.similarity = f"BM25 ({method}, k1={self.k1:g}, b={self.b:g}; bm25s)"

    def tokenizer(self) -> dict[str, Any]:
        """``bm25s.tokenize``'s defaults, which tokenize both sides, and the stop words they name."""
        parameters = inspect.signature(self.bm25s.tokenize).parameters
        settings = {key: parameters[key].default for key in TOKENIZER_SETTINGS}
        words = self.bm25s.tokenization._infer_stopwords(settings["stopwords"])
        settings["stopwords_sha256"] = hashlib.sha256(json.dumps(sorted(words)).encode()).hexdigest()
        return {"function": "bm25s.tokenize", **settings}

    def identity_info(self) -> dict[str, Any]:
        return {
            "family": "bm25",
            "library": f"bm25s {importlib.metadata.version('bm25s')}",
            "method": self.method,
            "idf_method": self.method,
            "k1": self.k1,
            "b": self.b,
            "delta": self.delta,
            "dtype": "float32",
            "tokenizer": self.tokenizer(),
        }

    def index(self, corpus: Sequence[str]) -> Any:
        """A ``bm25s.BM25`` index of ``corpus``."""
        retriever = self.bm25s.BM25(method=self.method, k1=self.k1, b=self.b, delta=self.delta)
        retriever.index(self.bm25s.tokenize(list(corpus), show_progress=False), show_progress=False)
        return retriever

    def view(self, settings: ViewSettings) -> View:
        return BM25View(self)


class BM25View(SearchView):
    """Each query's BM25 top list of the corpus it is given; ``facts``: the index's bytes."""

    kind = LEXICAL

    def __init__(self, model: BM25) -> None:
        super().__init__(model.name)
        self.model = model

    def _search(self, queries: Sequence[str], corpus: Sequence[str], k: int, roles: Roles, exclude: Any) -> Ranked:
        retriever = self.model.index(corpus)
        tokens = self.model.bm25s.tokenize(list(queries), return_ids=False, show_progress=False)
        rows = []
        for i, words in enumerate(tokens):
            scores = retriever.get_scores(list(words)) if words else np.zeros(len(corpus))
            rows.append(best_of_row(scores, k, -1 if exclude is None else int(exclude[i])))
        held = retriever.scores
        index_bytes = int(sum(held[key].nbytes for key in ("data", "indices", "indptr")))
        self._facts = {"index_bytes": index_bytes, "bytes_per_document": index_bytes / max(len(corpus), 1)}
        return padded(rows, k)


def build(name: str, spec: Params, context: BuildContext) -> BM25:
    return BM25(name, **spec)


FAMILY = Family.of("bm25", build, target="method", usage="bm25:<method>?k1=1.5&b=0.75", accepts=BM25)
