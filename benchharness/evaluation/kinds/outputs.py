"""A kind's outputs for texts, through the embedding cache: what a sparse, multi-vector or
cross-encoder model computed once is read back under its identity, never computed again.

The cache is the dense encoders' own (``evaluation.cache``: one SQLite database per identity, chunks
under sha1 keys with a crc32, a lock around writing, quarantine of a damaged file); only the layout of
a chunk's rows differs, by the kind's codec (``evaluation.row_codecs``). A model's outputs for each
role live under their own identity (``cache.cache_key``), as a dense encoder's vectors with role
prompts do. Without a cache folder nothing is written, and every call computes what it is asked.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder
from benchharness.core.prompts import Role
from benchharness.evaluation.cache import (
    ENCODE_CHUNK,
    CacheWriteError,
    DamagedCacheError,
    EmbeddingCache,
    Visit,
    cache_key,
    sentence_key,
)
from benchharness.evaluation.row_codecs import RowCodec

logger = logging.getLogger(__name__)

#: what a cache folder that cannot be used raises: the run goes on without the cache, said once
_CACHE_FAILURES = (sqlite3.Error, OSError, CacheWriteError)


class Outputs:
    """``encoder``'s outputs for ``role``, served from the cache in ``cache_dir`` where it holds them.

    ``get(keys, compute)`` returns one row per key, in order: the cached ones read in one scan, the
    others computed by ``compute(positions)`` (positions into ``keys``) a chunk at a time, each chunk
    stored as it comes. ``computed`` counts the items the model computed."""

    def __init__(self, encoder: Encoder, role: Role, codec: RowCodec, cache_dir: Path | None = None) -> None:
        self.name = encoder.name
        self.codec = codec
        self.identity = cache_key(encoder, role)
        # an unpinned model's outputs could be anyone's; rows read from files are cheaper to read again
        cached = encoder.pinned and encoder.cacheable
        self.cache = EmbeddingCache(Path(cache_dir), codec) if cache_dir is not None and cached else None
        self.computed = 0
        #: each cached key's chunk id, read once and renewed after a write (``_read``)
        self._index: dict[bytes, int] | None = None

    def get(self, keys: Sequence[str], compute: Callable[[list[int]], Any]) -> Any:
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        unique = list(first)
        slot = {sentence_key(k): j for j, k in enumerate(unique)}
        parts: list[tuple[np.ndarray, Any]] = []  # (slots, rows)

        def visit(chunk_keys: list[bytes], rows: Any) -> None:
            hits = [(i, slot[k]) for i, k in enumerate(chunk_keys) if k in slot]
            if hits:
                src, dst = (np.fromiter(col, dtype=np.intp, count=len(hits)) for col in zip(*hits))
                parts.append((dst, self.codec.take(rows, src)))

        if self.cache is not None:
            try:
                self._read(slot, visit, parts.clear)
            except _CACHE_FAILURES as exc:
                parts.clear()
                self._leave_cache("read", exc)
        filled = np.zeros(len(unique), dtype=bool)
        for dst, _ in parts:
            filled[dst] = True
        missing = np.flatnonzero(~filled)
        for start in range(0, len(missing), ENCODE_CHUNK):
            chunk = missing[start : start + ENCODE_CHUNK]
            rows = compute([first[unique[j]] for j in chunk])
            self.computed += len(chunk)
            parts.append((chunk, rows))
            self._store([unique[j] for j in chunk], rows)
        if not parts:
            return self.codec.empty(0)
        width = max(self.codec.width(rows) for _, rows in parts)
        joined = self.codec.concat([rows for _, rows in parts], width)
        row_of_slot = np.empty(len(unique), dtype=np.intp)
        row_of_slot[np.concatenate([dst for dst, _ in parts])] = np.arange(self.codec.count(joined))
        return self.codec.take(joined, row_of_slot[[slot[sentence_key(k)] for k in keys]])

    def _read(self, slot: dict[bytes, int], visit: Visit, restart: Callable[[], None]) -> None:
        """Visit the cached rows of the keys in ``slot``: only the chunks that hold them are read (the
        chunk of each key is known from one scan of the keys, renewed after each write), so asking
        for a corpus a block at a time reads each stored chunk about once, not the whole cache a block."""
        assert self.cache is not None
        try:
            if self._index is None:
                self._index = self.cache.key_index(self.identity)
            self.cache.read_chunks(self.identity, {self._index[k] for k in slot if k in self._index}, visit)
        except DamagedCacheError:
            restart()
            self._index = None
            self.cache.lookup(self.identity, visit)  # checks, quarantines and recreates the damaged file

    def _store(self, keys: list[str], rows: Any) -> None:
        """Commit the finite rows of one computed chunk (a non-finite one is returned, never cached)."""
        if self.cache is None:
            return
        finite = np.flatnonzero(self.codec.finite(rows))
        try:
            with self.cache.writer(self.identity) as writer:
                writer.add_keys([sentence_key(keys[i]) for i in finite], self.codec.take(rows, finite))
            self._index = None  # the new chunk (and a compaction's merged ones) are found at the next read
        except _CACHE_FAILURES as exc:
            self._leave_cache("written", exc)

    def _leave_cache(self, what: str, exc: BaseException) -> None:
        assert self.cache is not None
        logger.warning(
            "%s: the cache cannot be %s (%s: %s); this run goes on without it",
            self.name,
            what,
            self.cache.root / self.identity,
            exc,
        )
        self.cache = None


def by_role(
    model: Encoder, codec: RowCodec, cache_dir: Path | None, compute: Callable[[Sequence[str], Role], Any]
) -> Callable[[Sequence[str], Role], Any]:
    """``encode(texts, role)``: ``compute``'s rows of ``texts`` for ``role`` through one ``Outputs`` per
    role, each text computed once per role and identity, and read back on a later run."""
    held: dict[Role, Outputs] = {}

    def encode(texts: Sequence[str], role: Role) -> Any:
        if role not in held:
            held[role] = Outputs(model, role, codec, cache_dir)
        return held[role].get(texts, lambda positions: compute([texts[i] for i in positions], role))

    return encode
