"""One encoding pass's vectors, and how tasks read them: in memory, or on disk once the pass is too
large for memory.

Tasks read vectors through ``EmbeddingStore.embed`` (sentences -> rows) whichever way they are held,
so a task that reads its corpus a block at a time (QQP's search) keeps the run's memory bounded by
a block: the pass is filled chunk by chunk (``CachingEncoder.encode_into``, or ``encode_pass``'s own
chunks for an encoder without cache) and never exists as one array.

A pass holds one group of rows per distinct ``vector_key`` of the roles its tasks ask for: one
group for a symmetric encoder (a sentence asked for as query and as document is encoded once), one
per role for an encoder with role prompts. Each group fills its own region of the pass's rows.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchharness.core.encoder import Encoder, WrappingEncoder
from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.prompts import DEFAULT, Role
from benchharness.evaluation.cache import ENCODE_CHUNK, CachingEncoder, cache_key, sentence_key
from benchharness.evaluation.run_settings import DEFAULT_MEMORY_MIB

#: sentences above which an encoder without cache encodes a pass in chunks (longest first, as the
#: cache does), so that it can be written to disk as it goes; below, one call as it always has
LARGE_PASS = 262_144
#: rows read at a time where a whole pass is checked (non-finite rows, zero vectors)
READ_BLOCK = 65_536

logger = logging.getLogger(__name__)


class SpillError(UserError):
    """A pass's vectors could not be written to (or read back from) its spill file: a full disk, a
    file size limit, an I/O error. The pass fails: no task may be scored from rows never written.
    Deliberately not an ``OSError``, so that the embedding cache, which runs on without its own
    folder when that fails, never mistakes it for a failure of the cache."""


class RowFile:
    """float32 rows in a file, written and read by position with ``pwrite``/``pread``.

    Not a memory map: mapped pages that were touched count in the process's resident memory until
    they are unmapped, and bounding that memory is why the rows are on disk. Indexing with an array
    of positions reads (or writes) each run of consecutive rows with one call. Every write is
    checked to its last byte (a full disk writes short before it refuses), so a row is either on
    disk or the pass fails with a ``SpillError`` naming the file.
    """

    def __init__(self, path: Path, n: int, dim: int, fd: int | None = None) -> None:
        self.path = path
        self.shape = (n, dim)
        self.dtype = np.dtype(np.float32)
        self._row = dim * self.dtype.itemsize
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600) if fd is None else fd
        #: where the file moves, once, if its disk fills up (the temporary folder, for a spill beside the cache)
        self.spare: Path | None = None
        try:
            os.ftruncate(self._fd, n * self._row)
        except OSError as exc:
            self.close()
            raise self._error(exc) from None

    @classmethod
    def anonymous(cls, folder: Path | None, n: int, dim: int) -> RowFile:
        """A RowFile whose name is removed as soon as it is open: POSIX keeps an unlinked file while
        a descriptor holds it, so its space comes back when the pass ends or the process dies, even
        by SIGKILL, and no run ever leaves a spill file behind."""
        fd, name = tempfile.mkstemp(prefix="benchharness-pass-", suffix=".f32", dir=folder)
        try:
            os.unlink(name)
        except BaseException:
            os.close(fd)
            raise
        return cls(Path(name), n, dim, fd)

    def _error(self, cause: OSError | str) -> SpillError:
        return SpillError(
            f"cannot hold this pass's vectors in the spill file {self.path} ({cause}): free space in "
            f"{self.path.parent} (the cache folder, else TMPDIR) or give the pass more memory "
            "(--embedding-memory, embedding_memory_mib=)"
        )

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return 2

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _positions(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            return np.arange(*key.indices(self.shape[0]), dtype=np.intp)
        positions = np.asarray(key, dtype=np.intp).reshape(-1)
        if len(positions) and (positions.min() < 0 or positions.max() >= self.shape[0]):
            raise IndexError(f"row positions outside 0..{self.shape[0] - 1}")
        return positions

    @staticmethod
    def _runs(sorted_positions: np.ndarray) -> Iterator[tuple[int, int]]:
        """(start, stop) slices of ``sorted_positions`` over which the rows are consecutive."""
        breaks = np.flatnonzero(np.diff(sorted_positions) != 1) + 1
        edges = np.concatenate([[0], breaks, [len(sorted_positions)]])
        return zip(edges[:-1].tolist(), edges[1:].tolist())

    def __getitem__(self, key: Any) -> np.ndarray:
        positions = self._positions(key)
        order = np.argsort(positions, kind="stable")
        ordered = positions[order]
        out = np.empty((len(positions), self.shape[1]), dtype=self.dtype)
        for a, b in self._runs(ordered):
            size = (b - a) * self._row
            try:
                data = os.pread(self._fd, size, int(ordered[a]) * self._row)
            except OSError as exc:
                raise self._error(exc) from None
            if len(data) != size:
                raise self._error(f"read {len(data)} of {size} bytes")
            out[order[a:b]] = np.frombuffer(data, dtype=self.dtype).reshape(b - a, self.shape[1])
        return out

    def __setitem__(self, key: Any, rows: np.ndarray) -> None:
        positions = self._positions(key)
        rows = np.ascontiguousarray(np.broadcast_to(rows, (len(positions), self.shape[1])), dtype=self.dtype)
        order = np.argsort(positions, kind="stable")
        ordered, rows = positions[order], rows[order]
        for a, b in self._runs(ordered):
            self._write(rows[a:b].data.cast("B"), int(ordered[a]) * self._row)

    def _write(self, data: memoryview, offset: int) -> None:
        """All of ``data`` at ``offset``: ``pwrite`` may write only part (a full disk does, before it
        refuses with ENOSPC), so the rest is written until done or refused. A refused write moves the
        file to ``spare`` once, if there is one, and goes on there."""
        try:
            _write_all(self._fd, data, offset)
        except OSError as exc:
            if self.spare is None:
                raise self._error(exc) from None
            self._move(exc)
            self._write(data, offset)

    def _move(self, cause: OSError) -> None:
        """Copy what is written so far into an anonymous file in ``spare`` and use that one from now on."""
        spare, self.spare = self.spare, None
        try:
            moved = RowFile.anonymous(spare, *self.shape)
        except OSError as exc:
            raise self._error(f"{cause}; and in {spare}: {exc}") from None
        size, step = self.shape[0] * self._row, 1 << 24
        try:
            for offset in range(0, size, step):
                _write_all(moved._fd, memoryview(os.pread(self._fd, min(step, size - offset), offset)), offset)
        except OSError as exc:
            moved.close()
            raise self._error(f"{cause}; nor in {spare}: {exc}") from None
        logger.warning(
            "the spill file in %s has no room (%s); this pass's vectors moved to %s",
            self.path.parent,
            cause,
            moved.path.parent,
        )
        self.close()
        self._fd, self.path = moved._fd, moved.path
        moved._fd = -1

    def blocks(self, size: int = READ_BLOCK) -> Iterator[np.ndarray]:
        for start in range(0, self.shape[0], size):
            yield self[slice(start, min(start + size, self.shape[0]))]


Vectors = Any  # an np.ndarray or a RowFile: both index by an array of positions


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    """Every byte of ``data`` at ``offset``, however many calls ``pwrite`` takes; OSError if refused."""
    while len(data):
        done = os.pwrite(fd, data, offset)
        if done <= 0:
            raise OSError(errno.ENOSPC, f"wrote 0 of {len(data)} bytes")
        data, offset = data[done:], offset + done


class PassMemory:
    """Where one pass's vectors go: an array when they fit ``memory_mib``, else an anonymous
    ``RowFile`` (``RowFile.anonymous``) in ``folder`` (the cache folder) or the system's temporary
    folder, closed with the pass."""

    def __init__(self, n: int, memory_mib: float = DEFAULT_MEMORY_MIB, folder: Path | None = None) -> None:
        self.n, self.memory_mib, self.folder = n, memory_mib, folder
        self._file: RowFile | None = None
        #: the pass's rows, once the first vectors told their dimension
        self.rows: Vectors | None = None

    def fits(self, dim: int) -> bool:
        return self.n * dim * 4 <= self.memory_mib * 2**20

    def allocate(self, dim: int) -> Vectors:
        """The pass's rows, made at the first call; every later call (another role's region) gets the
        same rows, which must have the same dimension."""
        if self.rows is None:
            self.rows = self._make(dim)
        elif self.rows.shape[1] != dim:
            raise InvalidInputError(
                f"the encoder returned {self.rows.shape[1]}-dimensional vectors for one role and "
                f"{dim}-dimensional ones for another"
            )
        return self.rows

    def region(self, offset: int, n: int) -> Region:
        """Rows ``offset .. offset + n`` of the pass, for one group of sentences."""
        return Region(self, offset, n)

    def _make(self, dim: int) -> Vectors:
        if self.fits(dim):
            return np.empty((self.n, dim), dtype=np.float32)
        folder = self.folder
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                self._file = RowFile.anonymous(folder, self.n, dim)
                self._file.spare = Path(tempfile.gettempdir())
                return self._file
            except OSError as exc:  # a read-only or unusable cache folder: the run goes on without it
                logger.warning(
                    "cannot spill this pass's vectors beside the cache in %s (%s); using the temporary folder %s",
                    folder,
                    exc,
                    tempfile.gettempdir(),
                )
        try:
            self._file = RowFile.anonymous(None, self.n, dim)
        except OSError as exc:
            raise SpillError(
                f"cannot create a spill file for this pass's vectors in {tempfile.gettempdir()} ({exc}): "
                "set TMPDIR to a writable folder or give the pass more memory "
                "(--embedding-memory, embedding_memory_mib=)"
            ) from None
        return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> PassMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Region:
    """One group's rows of a pass: ``allocate`` hands out a view of the pass's rows (an array slice,
    or ``OffsetRows`` over a spill file) where the group's vectors are written in place."""

    def __init__(self, memory: PassMemory, offset: int, n: int) -> None:
        self.memory, self.offset, self.n = memory, offset, n

    def allocate(self, dim: int) -> Vectors:
        rows = self.memory.allocate(dim)
        if isinstance(rows, np.ndarray):
            return rows[self.offset : self.offset + self.n]
        return OffsetRows(rows, self.offset, self.n)


class OffsetRows:
    """Rows ``offset .. offset + n`` of a ``RowFile``, indexed from 0."""

    def __init__(self, rows: RowFile, offset: int, n: int) -> None:
        self.rows, self.offset, self.shape = rows, offset, (n, rows.shape[1])

    def __len__(self) -> int:
        return self.shape[0]

    def _shift(self, key: Any) -> np.ndarray:
        positions = np.arange(*key.indices(self.shape[0])) if isinstance(key, slice) else np.asarray(key).reshape(-1)
        if len(positions) and (positions.min() < 0 or positions.max() >= self.shape[0]):
            raise IndexError(f"row positions outside 0..{self.shape[0] - 1}")
        return positions.astype(np.intp) + self.offset

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.rows[self._shift(key)]

    def __setitem__(self, key: Any, rows: np.ndarray) -> None:
        self.rows[self._shift(key)] = rows


def encoding_line(total: int, cached: int) -> str:
    """What a pass is about to do, for the log: how many of its sentences are encoded, how many cached."""
    if cached == 0:
        return f"encoding {total:,} unique sentences"
    if cached == total:
        return f"all {total:,} unique sentences cached"
    return f"encoding {total - cached:,} of {total:,} unique sentences ({cached:,} cached)"


def cache_below(encoder: Encoder) -> CachingEncoder | None:
    """The embedding cache a pass of ``encoder`` goes through: its own, or, for a stage the cache
    does not keep (``+truncate``, ``+quantize``), its base's; it counts what the model encoded."""
    while not isinstance(encoder, CachingEncoder):
        if not isinstance(encoder, WrappingEncoder):
            return None
        encoder = encoder.wrapped
    return encoder


def _held_below(encoder: Encoder, sentences: Sequence[str], role: Role) -> int:
    """How many of ``sentences`` the cache below ``encoder``'s uncached stages holds for ``role``:
    what a pass of ``encoder`` will not encode (its stages ask their base for the same sentences).
    A cache that cannot be read counts none: the pass meets the same failure and says it."""
    cache = cache_below(encoder)
    if cache is None or cache.without_cache:
        return 0
    try:
        held = cache.cache.lookup(cache_key(cache.inner, role)).index
    except (sqlite3.Error, OSError, UserError):
        return 0
    return sum(sentence_key(s) in held for s in sentences)


def encode_pass(
    encoder: Encoder,
    sentences: Sequence[str],
    memory: PassMemory | Region,
    cached: Callable[[int], None] | None = None,
    role: Role = DEFAULT,
) -> Vectors:
    """Every (distinct) sentence's vector, in order, in the array ``allocate`` makes; ``cached`` is
    told, before any encoding, how many of them the cache serves (0 without a cache), the cache of
    the base for stages it does not keep.

    Through the cache, rows are copied in as the cache is scanned and as chunks are encoded. An
    encoder without cache encodes a pass of up to ``LARGE_PASS`` sentences in one call, as it always
    has; a larger one in chunks of the cache's size, longest first (the cache's order, so the
    batches are those of one call; see ``CachingEncoder._encode_missing``). The vectors are those
    of ``role`` (``Encoder.encode_role``).
    """
    if isinstance(encoder, CachingEncoder):
        return encoder.encode_into(sentences, memory.allocate, cached, role)
    if cached is not None:
        cached(_held_below(encoder, sentences, role))
    if len(sentences) <= LARGE_PASS:
        vectors = _checked(encoder, np.asarray(encoder.encode_role(list(sentences), role)), len(sentences))
        out = memory.allocate(vectors.shape[1])
        out[slice(0, len(sentences))] = vectors
        return out
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]), reverse=True)
    out = None
    for start in range(0, len(order), ENCODE_CHUNK):
        rows = np.asarray(order[start : start + ENCODE_CHUNK], dtype=np.intp)
        vecs = _checked(encoder, np.asarray(encoder.encode_role([sentences[i] for i in rows], role)), len(rows))
        if out is None:
            out = memory.allocate(vecs.shape[1])
        out[rows] = vecs
    return out


def _checked(encoder: Encoder, vectors: np.ndarray, n: int) -> np.ndarray:
    if vectors.ndim != 2 or len(vectors) != n:
        raise InvalidInputError(
            f"encoder {encoder.name!r} returned an array of shape {vectors.shape} for {n:,} sentences"
        )
    return vectors.astype(np.float32, copy=False)


#: one group of a pass: a role that stands for every role with its ``vector_key``, and its distinct sentences
Group = tuple[Role, list[str]]


def pass_groups(tasks: Sequence[Any], encoder: Encoder) -> dict[str, Group]:
    """The sentences ``tasks`` ask for, by the encoder's ``vector_key`` of the role they ask in:
    each key's distinct sentences (first-seen order) and one of its roles to encode them as."""
    groups: dict[str, Group] = {}
    for task in tasks:
        for role, sentences in task.requests().items():
            key = encoder.vector_key(role)
            group = groups.setdefault(key, (role, []))
            group[1].extend(sentences)
    return {key: (role, list(dict.fromkeys(sentences))) for key, (role, sentences) in groups.items()}


def encode_groups(
    encoder: Encoder,
    groups: dict[str, Group],
    memory: PassMemory,
    cached: Callable[[Role, int, int], None] | None = None,
) -> Vectors:
    """Every group's vectors in its region of one pass, in ``groups`` order; ``cached`` is told, for
    each group before it is encoded, its role, its size and how many of it the cache serves."""
    offset = 0
    for role, sentences in groups.values():
        encode_pass(
            encoder,
            sentences,
            memory.region(offset, len(sentences)),
            None if cached is None else functools.partial(cached, role, len(sentences)),
            role,
        )
        offset += len(sentences)
    if memory.rows is None:  # no sentence at all
        return np.zeros((0, 0), dtype=np.float32)
    return memory.rows


class EmbeddingStore:
    """(role, sentence) -> row lookup over one encoding pass; ``embed`` is what tasks receive.

    Built from a pass's groups, it maps a role to its group by the encoder's ``vector_key``; from a
    plain list of sentences (no encoder), every role reads the same rows."""

    def __init__(
        self, sentences: list[str] | dict[str, Group], vectors: Vectors, encoder: Encoder | None = None
    ) -> None:
        groups = {"": (DEFAULT, sentences)} if isinstance(sentences, list) else sentences
        self.index: dict[str, dict[str, int]] = {}
        offset = 0
        for key, (_, members) in groups.items():
            self.index[key] = {s: offset + i for i, s in enumerate(members)}
            offset += len(members)
        self.vectors = vectors
        # once per role: tasks embed per query, and a key is asked through every wrapper of the encoder
        self.key: Callable[[Role], str] = (lambda role: "") if encoder is None else functools.cache(encoder.vector_key)

    def positions(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        index = self.index.get(self.key(role), {})
        try:
            return np.fromiter((index[s] for s in sentences), dtype=np.intp, count=len(sentences))
        except KeyError as exc:
            raise KeyError(f"task asked for a sentence it did not declare (as {role}): {exc.args[0][:80]!r}") from None

    def embed(self, sentences: Sequence[str], role: Role = DEFAULT) -> np.ndarray:
        return self.vectors[self.positions(sentences, role)]


def unique_sentences(loaded: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(s for t in loaded for s in t.sentences()))


def non_finite_message(encoder: str, sentences: list[str], vectors: Vectors) -> str | None:
    """Why these vectors cannot be scored (rows holding NaN or inf), or None when all are finite."""
    if getattr(vectors, "ndim", None) != 2 or len(vectors) != len(sentences):
        return f"encoder {encoder!r} returned an array of shape {vectors.shape} for {len(sentences):,} sentences"
    blocks = [vectors] if isinstance(vectors, np.ndarray) else vectors.blocks()
    bad = np.concatenate([~np.isfinite(block).all(axis=1) for block in blocks])
    if not bad.any():
        return None
    first = sentences[int(np.argmax(bad))]
    return (
        f"encoder {encoder!r} returned {int(bad.sum()):,} non-finite vectors (NaN or inf) of {len(sentences):,} "
        f"(first: {first[:60]!r}); nothing was scored or stored. Check the model's weights and its "
        "precision (fp16 overflows), or its input handling for such sentences"
    )


def zero_vectors(embeddings: EmbeddingStore, requests: dict[Role, list[str]]) -> tuple[int, int]:
    """How many of the distinct (role, sentence) vectors a task asks for are all-zero (e.g. every
    word out of a word-vector vocabulary), and how many it asks for: cosine similarity is undefined
    for them, so the result reports them. Read a block at a time."""
    zeros = total = 0
    seen: dict[str, set[str]] = {}
    for role, sentences in requests.items():  # a sentence asked for in two roles with one vector counts once
        held = seen.setdefault(embeddings.key(role), set())
        distinct = [s for s in dict.fromkeys(sentences) if s not in held]
        held.update(distinct)
        total += len(distinct)
        zeros += sum(
            int((~embeddings.embed(distinct[i : i + READ_BLOCK], role).any(axis=1)).sum())
            for i in range(0, len(distinct), READ_BLOCK)
        )
    return zeros, total
