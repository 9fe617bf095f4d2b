"""A kind's outputs through the embedding cache: each codec's rows come back exactly as computed,
from one computation, in the order asked, and a damaged chunk is caught as a dense one is."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import scipy.sparse as sp

from benchharness.core.kind_models import SparseModel
from benchharness.core.prompts import DEFAULT, DOCUMENT, QUERY
from benchharness.evaluation.cache import DB_NAME, EmbeddingCache
from benchharness.evaluation.kinds.outputs import Outputs
from benchharness.evaluation.row_codecs import DENSE_ROWS, SPARSE_ROWS, TOKEN_ROWS, TokenRows


class _Sparse(SparseModel):
    """A stand-in model: only its identity and roles matter to the cache."""

    role_aware = True

    def __init__(self, pinned: bool = True) -> None:
        super().__init__("toy-sparse")
        self._pinned = pinned

    @property
    def pinned(self) -> bool:
        return self._pinned

    def encode_sparse(self, sentences, role=DEFAULT):
        raise AssertionError("not called: the tests compute through Outputs")

    @property
    def vocabulary_size(self) -> int:
        return 50

    def identity_info(self):
        return {"family": "toy", "model": "sparse"}


def _sparse_rows(texts: list[str]) -> sp.csr_matrix:
    """A row per text whose active terms are its characters' codes mod 50, valued by position."""
    rows = sp.lil_matrix((len(texts), 50), dtype=np.float32)
    for i, text in enumerate(texts):
        for j, ch in enumerate(text):
            rows[i, ord(ch) % 50] = j + 1.5
    return rows.tocsr()


def _tokens(texts: list[str]) -> list[np.ndarray]:
    return [np.arange(len(t) * 3, dtype=np.float32).reshape(len(t), 3) + ord(t[0]) for t in texts]


@pytest.mark.parametrize(
    ("codec", "make", "equal"),
    [
        (SPARSE_ROWS, _sparse_rows, lambda a, b: (a != b).nnz == 0 and a.shape == b.shape),
        (TOKEN_ROWS, _tokens, lambda a, b: len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))),
        (DENSE_ROWS, lambda t: np.array([[len(s), ord(s[0])] for s in t], np.float32), np.array_equal),
    ],
)
def test_rows_come_back_as_computed_and_are_computed_once(tmp_path, codec, make, equal):
    asked: list[list[str]] = []

    def get(keys: list[str]):
        def compute(positions):
            asked.append([keys[i] for i in positions])
            return make([keys[i] for i in positions])

        return Outputs(_Sparse(), QUERY, codec, tmp_path).get(keys, compute)

    first = get(["a dog", "the cat", "a dog", "rain", "z"])
    assert asked == [["a dog", "the cat", "rain", "z"]]  # each distinct key once
    assert equal(first, make(["a dog", "the cat", "a dog", "rain", "z"]))  # in the order asked, duplicates too
    again = get(["z", "a dog", "new"])
    assert asked[-1] == ["new"]  # the rest read from the cache
    assert equal(again, make(["z", "a dog", "new"]))


def test_roles_are_kept_apart_and_an_unpinned_model_is_never_cached(tmp_path):
    calls = []

    def compute(positions):
        calls.append(len(positions))
        return _sparse_rows(["abc"] * len(positions))

    Outputs(_Sparse(), QUERY, SPARSE_ROWS, tmp_path).get(["abc"], compute)
    Outputs(_Sparse(), DOCUMENT, SPARSE_ROWS, tmp_path).get(["abc"], compute)
    assert calls == [1, 1]  # a query's output is never served as a document's
    Outputs(_Sparse(pinned=False), QUERY, SPARSE_ROWS, tmp_path / "other").get(["abc"], compute)
    assert not (tmp_path / "other").exists()


def test_a_damaged_sparse_chunk_is_quarantined_and_recomputed(tmp_path, caplog):
    model = _Sparse()
    Outputs(model, QUERY, SPARSE_ROWS, tmp_path).get(["abc", "de"], lambda p: _sparse_rows(["abc", "de"]))
    db = next(tmp_path.rglob(DB_NAME))
    con = sqlite3.connect(db)
    con.execute("UPDATE chunks SET vecs = substr(vecs, 1, length(vecs) - 4)")  # one value short
    con.commit()
    con.close()
    computed = Outputs(model, QUERY, SPARSE_ROWS, tmp_path)
    rows = computed.get(["abc", "de"], lambda p: _sparse_rows([["abc", "de"][i] for i in p]))
    assert computed.computed == 2
    assert (rows != _sparse_rows(["abc", "de"])).nnz == 0
    assert "damaged" in caplog.text and list((db.parent / "quarantine").iterdir())


def test_a_dense_cache_is_never_read_as_another_kind(tmp_path):
    EmbeddingCache(tmp_path).add("same-identity", ["abc"], np.ones((1, 4), np.float32))
    with pytest.raises(Exception, match="format '1'"):
        EmbeddingCache(tmp_path, SPARSE_ROWS).lookup("same-identity")


def test_a_block_at_a_time_reads_only_the_chunks_that_hold_it(tmp_path):
    """A corpus asked for a block at a time (a multi-vector search) reads each stored chunk once, not
    the whole cache for every block."""

    class Counting(TokenRows):
        unpacked = 0

        def unpack(self, blob, n, width):
            Counting.unpacked += 1
            return super().unpack(blob, n, width)

    codec = Counting()
    blocks = [[f"text {b}-{i}" for i in range(3)] for b in range(5)]
    for block in blocks:  # five runs, five chunks
        Outputs(_Sparse(), QUERY, codec, tmp_path).get(block, lambda p, block=block: _tokens([block[i] for i in p]))
    outputs = Outputs(_Sparse(), QUERY, codec, tmp_path)
    Counting.unpacked = 0
    for block in blocks:
        rows = outputs.get(block, lambda p: pytest.fail("all cached"))
        assert all(np.array_equal(a, b) for a, b in zip(rows, _tokens(block)))
    assert Counting.unpacked == 5  # one chunk a block; a full scan each time would read 25
