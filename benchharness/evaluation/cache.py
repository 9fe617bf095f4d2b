"""On-disk embedding cache: one SQLite database (WAL mode) per encoder identity.

Why SQLite and not hand-written shards: it already gives atomic commits, crash recovery and
readers that never see a half-written chunk, so the cache only adds what a database cannot know
(checksums of the vectors, a lock around encoding, quarantine of a damaged file).
``benchmarks/cache_store.py`` chose the layout: storing each committed chunk as two blobs (its
20-byte sha1 keys and its float32 rows) reads the 26,289 x 384 STS cache with about a third of
the CPU time of one row per sentence, and as fast as the old npz shards.

Layout, under ``<root>/<identity>/``:

* ``embeddings.sqlite``: tables ``meta`` (format, dim) and ``chunks`` (n, keys, vecs, crc32);
* ``lock``: ``flock``-ed by a process while it encodes or repairs, so that two runs of the same
  encoder never both encode the same sentences (the later one waits, then reuses);
* ``quarantine/``: damaged databases (and unreadable old shards, met by ``benchharness data
  migrate``: ``evaluation/migrate.py``), moved aside with a warning naming them.

Keys are the full 20-byte sha1 digests, sliced from the stored blob, so they are exact (the old
shards' numpy ``S20`` keys lost trailing NUL bytes, and those sentences missed on every rerun).
Readers take no lock: WAL gives them a consistent snapshot while a writer commits.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from benchharness.core.encoder import Encoder, WrappingEncoder, stable_hash
from benchharness.core.errors import InvalidInputError, UserError
from benchharness.core.progress import progress_shown, shown
from benchharness.core.prompts import DEFAULT as DEFAULT_ROLE
from benchharness.core.prompts import Role
from benchharness.evaluation.row_codecs import DENSE_ROWS, RowCodec

logger = logging.getLogger(__name__)

KEY_BYTES = 20  # sha1 digest
DB_NAME = "embeddings.sqlite"
LOCK_NAME = "lock"
QUARANTINE = "quarantine"
#: sentences encoded and committed together: a killed run loses at most this many encodings.
ENCODE_CHUNK = 2048
#: chunks with fewer rows than this are "small"; once more than MAX_SMALL_CHUNKS of them pile up
#: (each run that adds sentences leaves one), they are merged into chunks of up to MERGED_CHUNK rows.
SMALL_CHUNK = 2048
MAX_SMALL_CHUNKS = 8
MERGED_CHUNK = 65536  # 96 MiB at dim 384, well under SQLite's 1 GB blob limit
#: seconds a write waits for another connection's SQLite write lock before saying so, and in all: a
#: lock held longer than BUSY_TIMEOUT_S (a foreign program's open transaction) leaves the run to go on
#: without the cache. The harness's own writers never meet here: they queue on the ``lock`` file first.
LOCK_NOTICE_S = 2
BUSY_TIMEOUT_S = 600
_CORRUPTION_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def sentence_key(sentence: str) -> bytes:
    return hashlib.sha1(sentence.encode("utf8")).digest()


class CacheWriteError(UserError):
    """The cache cannot take more rows (a full disk, a read-only folder): the message names the file
    and SQLite's cause; what is stored stays intact."""


#: what a cache folder that cannot be used raises (read-only, full, forbidden, locked, not a folder):
#: the run goes on without the cache. Not the errors of the encoder or of the pass's own memory.
_CACHE_FAILURES = (sqlite3.Error, OSError, CacheWriteError)


class DamagedCacheError(UserError):
    """A cache file that cannot be trusted; it is quarantined and its sentences re-encoded."""


@dataclass
class CachedRows:
    """Which sentences are cached for one identity (their keys), not their vectors: those are read
    chunk by chunk while the table is scanned (``EmbeddingCache.lookup``'s ``visit``), so serving a
    corpus never holds more than one stored chunk beside what the caller asked for."""

    index: set[bytes]
    dim: int | None = None

    def __len__(self) -> int:
        return len(self.index)


#: called with each stored chunk's keys and rows, in storage order, while the table is scanned
Visit = Callable[[list[bytes], np.ndarray], None]


def _crc(keys: bytes, vecs: bytes) -> int:
    return zlib.crc32(vecs, zlib.crc32(keys))


def _connect(path: Path) -> sqlite3.Connection:
    # mode=rw: reading never creates a database; isolation_level=None: transactions are explicit
    con = sqlite3.connect(f"{path.absolute().as_uri()}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        # WAL + NORMAL: a killed process loses no commit; a foreign exclusive lock, which even WAL
        # readers wait for, is met here
        _patiently(con, path, lambda: con.execute("PRAGMA synchronous=NORMAL"))
    except sqlite3.DatabaseError as exc:  # the first statement reads the header
        con.close()
        if _is_corruption(exc):
            raise DamagedCacheError(str(exc)) from exc
        raise sqlite3.DatabaseError(f"embedding cache {path}: {exc}") from exc
    return con


T = TypeVar("T")


def _patiently(con: sqlite3.Connection, path: Path, attempt: Callable[[], T]) -> T:
    """``attempt()``, saying so when another connection's lock (a foreign program's open write or
    exclusive transaction) makes it wait longer than LOCK_NOTICE_S; it then waits up to
    BUSY_TIMEOUT_S in all and fails as SQLite does ('database is locked')."""
    try:
        con.execute(f"PRAGMA busy_timeout={int(LOCK_NOTICE_S * 1000)}")
        return attempt()
    except sqlite3.DatabaseError as exc:
        if not _is_busy(exc):
            raise
    finally:
        con.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    logger.warning(
        "embedding cache %s is locked by another program's open write transaction; waiting up to "
        "%g s for it, then going on without the cache",
        path,
        BUSY_TIMEOUT_S - LOCK_NOTICE_S,
    )
    try:
        con.execute(f"PRAGMA busy_timeout={int((BUSY_TIMEOUT_S - LOCK_NOTICE_S) * 1000)}")
        return attempt()
    finally:
        con.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")


def _is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED, raised directly or wrapped by ``_read`` (which names the file)."""
    for err in (exc, exc.__cause__):
        code = getattr(err, "sqlite_errorcode", None)  # Python >= 3.11
        if code is not None and (code & 0xFF) in (5, 6):
            return True
        if code is None and isinstance(err, sqlite3.OperationalError) and "database is locked" in str(err):
            return True
    return False


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if code is None:
        return any(text in str(exc) for text in ("malformed", "not a database"))
    return (code & 0xFF) in _CORRUPTION_CODES


def _read(path: Path, con: sqlite3.Connection, visit: Visit | None = None, codec: RowCodec = DENSE_ROWS) -> CachedRows:
    """The keys of an open database, every chunk's length and crc32 checked; ``visit`` sees each
    chunk's rows (as ``codec`` lays them out). One statement, so one consistent snapshot, stepped
    row by row: one chunk is in memory at a time."""
    try:
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"meta", "chunks"} <= tables:
            raise DamagedCacheError(f"no meta/chunks tables (found {sorted(tables)})")
        meta = dict(con.execute("SELECT name, value FROM meta").fetchall())
        if "format" not in meta:
            raise DamagedCacheError("no format in its meta table")
        if meta.get("identity", path.parent.name) != path.parent.name:  # a file copied from another encoder
            raise DamagedCacheError(
                f"it holds the vectors of encoder identity {meta['identity']}, not {path.parent.name}"
            )
        if meta["format"] != codec.format:  # a newer harness's cache is not damaged: leave it alone
            raise InvalidInputError(
                f"embedding cache {path} has format {meta['format']!r}; this version reads "
                f"format {codec.format!r} there. Use another cache folder (--cache-dir) or update benchharness"
            )
        dim = int(meta["dim"]) if "dim" in meta else None
        index: set[bytes] = set()
        for n, keys, vecs, crc in con.execute("SELECT n, keys, vecs, crc FROM chunks ORDER BY id"):
            rows = codec.checked_unpack(vecs, n, dim)
            if len(keys) != n * KEY_BYTES or rows is None or _crc(keys, vecs) != crc:
                raise DamagedCacheError(f"a chunk of {n} rows fails its length or crc32 check")
            chunk_keys = [keys[i : i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)]
            before = len(index)
            index.update(chunk_keys)
            if len(index) != before + n:
                raise DamagedCacheError("a key is stored twice")  # writers skip known keys
            if visit is not None:
                visit(chunk_keys, rows)
    except sqlite3.DatabaseError as exc:
        if _is_corruption(exc):
            raise DamagedCacheError(str(exc)) from exc
        raise sqlite3.DatabaseError(f"embedding cache {path}: {exc}") from exc
    return CachedRows(index, dim)


def _create(path: Path, codec: RowCodec = DENSE_ROWS) -> None:
    """An empty database, built beside ``path`` and renamed into place in one step.

    So a database that exists always has its schema, and an empty or headless file is damage,
    not a run killed between creating the file and writing its first page.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666))  # 0666 & ~umask
    try:
        con = _connect(tmp)
        try:
            con.execute("PRAGMA page_size=8192")  # 5 rows of 1.5 kB per page instead of 2
            con.execute("PRAGMA journal_mode=WAL")  # persistent: stored in the file header
            con.execute("BEGIN")
            con.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            con.execute(
                "CREATE TABLE chunks (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
                "keys BLOB NOT NULL, vecs BLOB NOT NULL, crc INTEGER NOT NULL)"
            )
            con.execute("INSERT INTO meta VALUES ('format', ?)", (codec.format,))
            con.execute("INSERT INTO meta VALUES ('identity', ?)", (path.parent.name,))
            con.execute("COMMIT")
        finally:
            con.close()  # checkpoints and removes tmp's -wal/-shm
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: lock files held by each thread of this process, with nesting depth; and, per lock file, the
#: lock the threads of this process take first (two threads sharing a cache folder queue there:
#: ``flock`` on a second descriptor of one file would deadlock the process against itself)
_held = threading.local()
_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive lock on ``path`` against other processes (``flock``, released by the kernel if we
    are killed) and other threads of this one; re-entrant within a thread."""
    import fcntl

    depth: dict[Path, int] = _held.__dict__.setdefault("depth", {})
    if path in depth:
        depth[path] += 1
        try:
            yield
        finally:
            depth[path] -= 1
        return
    with _thread_locks_guard:
        thread_lock = _thread_locks.setdefault(path, threading.Lock())
    if not thread_lock.acquire(blocking=False):
        logger.info("waiting for another thread of this process that is writing the embedding cache %s", path.parent)
        thread_lock.acquire()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logger.info(
                    "waiting for another process that is writing the embedding cache %s: it holds %s until "
                    "it has encoded what the cache lacks (its progress bar says how long)",
                    path.parent,
                    path.name,
                )
                fcntl.flock(fd, fcntl.LOCK_EX)
            depth[path] = 1
            try:
                yield
            finally:
                del depth[path]
        finally:
            os.close(fd)  # releases the lock
    finally:
        thread_lock.release()


class CacheWriter:
    """The open database of one identity while its lock is held; ``add_keys`` commits a chunk."""

    def __init__(self, path: Path, con: sqlite3.Connection, rows: CachedRows, codec: RowCodec = DENSE_ROWS) -> None:
        self.path, self.con, self.codec = path, con, codec
        self._keys = set(rows.index)
        self._dim = rows.dim

    @property
    def rows(self) -> CachedRows:
        """What the database holds now, including what this writer committed."""
        return CachedRows(set(self._keys), self._dim)

    def read(self, visit: Visit) -> None:
        """Scan the stored rows under the lock (what a concurrent run committed before we took it)."""
        _read(self.path, self.con, visit, self.codec)

    def add(self, sentences: Sequence[str], vectors: Any) -> int:
        return self.add_keys([sentence_key(s) for s in sentences], vectors)

    def add_keys(self, keys: Sequence[bytes], vectors: Any) -> int:
        """Commit the rows whose keys are not stored yet, as one chunk; returns how many.

        Non-finite rows are refused (ValueError): a NaN stored once would be served forever.
        """
        if any(len(k) != KEY_BYTES for k in keys):
            raise InvalidInputError(f"{self.path}: keys must be {KEY_BYTES}-byte sha1 digests")
        vectors = self.codec.checked(vectors, len(keys), str(self.path), self._dim)
        fresh: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in self._keys and k not in fresh:
                fresh[k] = i
        if not fresh:
            return 0
        width = self.codec.width(vectors)
        keys_blob, vecs_blob = b"".join(fresh), self.codec.pack(self.codec.take(vectors, list(fresh.values())))
        with self._transaction():
            if self._dim is None:
                self.con.execute("INSERT INTO meta VALUES ('dim', ?)", (str(width),))
            # a database made before identities were recorded takes its folder's at its next write
            self.con.execute("INSERT OR IGNORE INTO meta VALUES ('identity', ?)", (self.path.parent.name,))
            self.con.execute(
                "INSERT INTO chunks (n, keys, vecs, crc) VALUES (?, ?, ?, ?)",
                (len(fresh), keys_blob, vecs_blob, _crc(keys_blob, vecs_blob)),
            )
        self._dim = width
        self._keys.update(fresh)
        return len(fresh)

    def compact(self) -> None:
        """Merge small chunks once more than MAX_SMALL_CHUNKS exist, in one transaction."""
        small = self.con.execute("SELECT id FROM chunks WHERE n < ? ORDER BY id", (SMALL_CHUNK,)).fetchall()
        if len(small) <= MAX_SMALL_CHUNKS:
            return
        ids = [i for (i,) in small]
        with self._transaction():
            marks = ",".join("?" * len(ids))
            got = self.con.execute(
                f"SELECT n, keys, vecs, crc FROM chunks WHERE id IN ({marks}) ORDER BY id", ids
            ).fetchall()
            if any(_crc(k, v) != c for _, k, v, c in got):
                raise DamagedCacheError("a chunk fails its crc32 check")
            keys = b"".join(k for _, k, _, _ in got)
            merged = self.codec.merged([(n, v) for n, _, v, _ in got], self._dim or 0, MERGED_CHUNK)
            self.con.execute(f"DELETE FROM chunks WHERE id IN ({marks})", ids)
            start = 0
            for n, v in merged:
                k = keys[start * KEY_BYTES : (start + n) * KEY_BYTES]
                start += n
                self.con.execute("INSERT INTO chunks (n, keys, vecs, crc) VALUES (?, ?, ?, ?)", (n, k, v, _crc(k, v)))

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; a failure rolls back (unless SQLite already has, as after a COMMIT
        that found the disk full) and a write SQLite refuses is named with the file and its cause."""
        try:
            _patiently(self.con, self.path, lambda: self.con.execute("BEGIN IMMEDIATE"))
        except sqlite3.OperationalError as exc:
            raise CacheWriteError(f"cannot write the embedding cache {self.path}: {exc}") from None
        try:
            yield
            self.con.execute("COMMIT")
        except BaseException as exc:
            if self.con.in_transaction:  # SQLite has already rolled back a COMMIT that failed (disk full)
                self.con.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise CacheWriteError(f"cannot write the embedding cache {self.path}: {exc}") from None
            raise


class EmbeddingCache:
    """Cached embeddings under ``root``, one folder (and database) per encoder identity; ``codec``
    lays out a chunk's rows (dense vectors by default, ``evaluation.row_codecs`` for the other kinds)."""

    def __init__(self, root: Path, codec: RowCodec = DENSE_ROWS) -> None:
        self.root = Path(root)
        self.codec = codec
        #: identities whose folder failed in this run: every encoder of one goes on without it, said once
        self.unusable: set[str] = set()

    def _folder(self, identity: str) -> Path:
        return self.root / identity

    def lookup(
        self, identity: str, visit: Visit | None = None, restart: Callable[[], None] | None = None
    ) -> CachedRows:
        """What is cached for ``identity``: one scan of its table, no lock; ``visit`` sees each stored
        chunk's keys and rows as the scan passes them.

        Only if the database is damaged does it take the identity's lock through :meth:`writer`;
        the scan then starts again on the repaired table, after ``restart`` has told the caller to
        forget what ``visit`` was shown of the damaged one (its chunks passed their crc32, but they
        are no longer cached).
        """
        path = self._folder(identity) / DB_NAME
        if not path.exists():
            return CachedRows(set())
        try:
            con = _connect(path)
            try:
                return _patiently(con, path, lambda: _read(path, con, visit, self.codec))
            finally:
                con.close()
        except DamagedCacheError:
            if restart is not None:
                restart()  # the writer re-checks under the lock, then quarantines
        with self.writer(identity) as writer:
            if visit is not None:
                writer.read(visit)
            return writer.rows

    def key_index(self, identity: str) -> dict[bytes, int]:
        """Each cached key's chunk id, from a scan of the keys alone (20 bytes a row, no rows read): a
        caller that asks for a few rows at a time (a corpus a block at a time) reads only the chunks
        that hold them (``read_chunks``)."""
        path = self._folder(identity) / DB_NAME
        if not path.exists():
            return {}
        con = _connect(path)
        try:
            rows = _patiently(con, path, lambda: con.execute("SELECT id, n, keys FROM chunks").fetchall())
        finally:
            con.close()
        index: dict[bytes, int] = {}
        for chunk, n, keys in rows:
            if len(keys) != n * KEY_BYTES:
                raise DamagedCacheError(f"{path}: a chunk of {n} rows holds {len(keys)} bytes of keys")
            index.update((keys[i : i + KEY_BYTES], chunk) for i in range(0, len(keys), KEY_BYTES))
        return index

    def read_chunks(self, identity: str, chunks: Iterable[int], visit: Visit) -> None:
        """``visit`` each of ``chunks``' keys and rows, every chunk checked against its length and
        crc32 (``DamagedCacheError`` otherwise: ``lookup`` then repairs the file)."""
        wanted = sorted(set(chunks))
        if not wanted:
            return
        path = self._folder(identity) / DB_NAME
        con = _connect(path)
        try:
            meta = dict(_patiently(con, path, lambda: con.execute("SELECT name, value FROM meta").fetchall()))
            if meta.get("format") != self.codec.format:
                raise InvalidInputError(
                    f"embedding cache {path} has format {meta.get('format')!r}; this version reads format "
                    f"{self.codec.format!r} there. Use another cache folder (--cache-dir) or update benchharness"
                )
            width = int(meta.get("dim", 0))
            for start in range(0, len(wanted), 500):  # SQLite's bound on a statement's parameters
                ids = wanted[start : start + 500]
                marks = ",".join("?" * len(ids))
                query = f"SELECT n, keys, vecs, crc FROM chunks WHERE id IN ({marks}) ORDER BY id"
                for n, keys, vecs, crc in con.execute(query, ids):
                    rows = self.codec.checked_unpack(vecs, n, width)
                    if len(keys) != n * KEY_BYTES or rows is None or _crc(keys, vecs) != crc:
                        raise DamagedCacheError(f"{path}: a chunk of {n} rows fails its length or crc32 check")
                    visit([keys[i : i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)], rows)
        finally:
            con.close()

    @contextlib.contextmanager
    def writer(self, identity: str) -> Iterator[CacheWriter]:
        """Hold the identity's lock and its open database (created or repaired first).

        Its ``rows`` are read after the lock is taken, so they include everything a concurrent
        run committed before releasing it.
        """
        folder = self._folder(identity)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / DB_NAME
        with _locked(folder / LOCK_NAME):
            con, rows = self._open_checked(path)
            try:
                writer = CacheWriter(path, con, rows, self.codec)
                yield writer
                writer.compact()
            finally:
                con.close()

    def add(self, identity: str, sentences: Sequence[str], vectors: np.ndarray) -> int:
        """Store rows for ``sentences`` (those not cached yet) as one chunk; returns how many."""
        with self.writer(identity) as writer:
            return writer.add(sentences, vectors)

    def _open_checked(self, path: Path) -> tuple[sqlite3.Connection, CachedRows]:
        """Open (creating if absent) and fully check the database; quarantine it if damaged.

        ``quick_check`` covers the b-tree pages a plain read skips; the crc32s cover the vectors.
        Called with the lock held.
        """
        if path.exists():
            try:
                return self._checked(path)
            except DamagedCacheError as exc:
                quarantine(path, str(exc))
        _create(path, self.codec)
        con = _connect(path)
        return con, _read(path, con, codec=self.codec)

    def _checked(self, path: Path) -> tuple[sqlite3.Connection, CachedRows]:
        con = _connect(path)
        try:
            try:
                problems = [
                    msg for (msg,) in _patiently(con, path, lambda: con.execute("PRAGMA quick_check").fetchall())
                ]
            except sqlite3.DatabaseError as exc:
                if not _is_corruption(exc):
                    raise
                problems = [str(exc)]
            if problems != ["ok"]:
                raise DamagedCacheError("; ".join(problems[:3]))
            return con, _read(path, con, codec=self.codec)
        except BaseException:
            con.close()
            raise


def quarantine(path: Path, reason: str) -> None:
    """Move a damaged file (and its -wal/-shm) to ``quarantine/`` beside it and say so; call it with
    the identity's lock held."""
    qdir = path.parent / QUARANTINE
    qdir.mkdir(exist_ok=True)
    dest = qdir / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            os.replace(src, dest.with_name(dest.name + suffix))
    logger.warning(
        "embedding cache file %s is damaged (%s); moved to %s; its sentences will be re-encoded", path, reason, dest
    )


#: makes the array a call fills, once the vectors' dimension is known (``np.empty`` by default; the
#: runner hands a disk-backed allocator for passes too large for memory)
Allocate = Callable[[int], Any]


class _Filler:
    """Copies the cached rows of the sentences asked for into the output while the table is scanned."""

    def __init__(self, where: dict[bytes, int], allocate: Allocate) -> None:
        self.where, self.allocate = where, allocate
        self.out: Any = None
        self.filled = np.zeros(len(where), dtype=bool)

    def __call__(self, keys: list[bytes], rows: np.ndarray) -> None:
        hits = [(j, self.where[k]) for j, k in enumerate(keys) if k in self.where]
        if not hits:
            return
        if self.out is None:
            self.out = self.allocate(rows.shape[1])
        src, dst = (np.fromiter(col, dtype=np.intp, count=len(hits)) for col in zip(*hits))
        self.out[dst] = rows[src]
        self.filled[dst] = True

    def clear(self) -> None:
        self.filled[:] = False


def cache_key(encoder: Encoder, role: Role) -> str:
    """The cache folder of ``encoder``'s vectors for ``role``: its identity, for the vectors every
    role shares (no prompt, or one for all); its identity and a digest of the role's ``vector_key``
    otherwise, so that a query's vector is never served as a document's."""
    key = encoder.vector_key(role)
    return encoder.identity if not key else f"{encoder.identity}-{stable_hash(key)[:8]}"


class CachingEncoder(WrappingEncoder):
    """Serves what the cache holds and encodes (then stores) only the rest.

    It is transparent: name, identity, metadata and mask token are the wrapped encoder's, so a
    post-processor built on top of it fits on cached base vectors. It keeps no rows between calls:
    each call scans the cache once, copying out the rows it was asked for, so its memory is the
    answer plus one stored chunk, whatever the size of the cache.
    """

    def __init__(
        self,
        inner: Encoder,
        cache: EmbeddingCache,
        chunk_size: int | None = None,
        encode_chunks: Callable[[Iterable[list[str]], Role], Iterator[np.ndarray]] | None = None,
    ) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.cache = cache
        #: ``ENCODE_CHUNK`` as it is when the encoder is built (a test makes it small to cut a short pass)
        self.chunk_size = chunk_size or ENCODE_CHUNK
        #: encodes a stream of chunks elsewhere (a pool of Ray actors), yielding their vectors in order
        self.encode_chunks = encode_chunks
        self.encoded = 0  # sentences actually encoded (not served from the cache)
        #: set once the cache failed (a read-only, full or locked folder): the rest of the run goes on
        #: without it, and that was said once (``EmbeddingCache.unusable``)
        self.without_cache = False

    @property
    def wrapped(self) -> Encoder:
        return self.inner

    def encode_role(self, sentences: Sequence[str], role: Role = DEFAULT_ROLE) -> np.ndarray:
        if not sentences:
            return np.zeros((0, 0), dtype=np.float32)
        unique = list(dict.fromkeys(sentences))
        vectors = self.encode_into(unique, lambda dim: np.empty((len(unique), dim), np.float32), role=role)
        if len(unique) == len(sentences):
            return vectors
        row = {s: i for i, s in enumerate(unique)}
        return vectors[np.fromiter((row[s] for s in sentences), dtype=np.intp, count=len(sentences))]

    def encode_into(
        self,
        sentences: Sequence[str],
        allocate: Allocate,
        cached: Callable[[int], None] | None = None,
        role: Role = DEFAULT_ROLE,
    ) -> Any:
        """The vectors of distinct ``sentences``, in order, in the array ``allocate(dim)`` makes: cached
        rows are copied in during one scan of the cache, the rest encoded chunk by chunk, committed
        and copied in; ``cached`` is told how many the scan served, before any encoding. Non-finite
        vectors are returned as they are and never cached. A cache that cannot be read or written is
        left for the rest of the run, with one warning. Each role's vectors are kept apart from the
        others' (``cache_key``) unless the encoder gives every role the same ones."""
        identity = cache_key(self.inner, role)
        where = {sentence_key(s): i for i, s in enumerate(sentences)}
        if len(where) != len(sentences):
            raise InvalidInputError(f"{self.name}: encode_into takes distinct sentences")
        fill = _Filler(where, allocate)
        self.without_cache = self.without_cache or identity in self.cache.unusable
        if not self.without_cache:
            try:
                self.cache.lookup(identity, fill, fill.clear)
            except _CACHE_FAILURES as exc:
                fill.clear()
                self._leave_cache("read", identity, exc)
        if cached is not None:
            cached(int(fill.filled.sum()))
        if fill.filled.all():
            return fill.out
        chunks = self._encode_missing(sentences, fill, role)
        if not self.without_cache:
            self._encode_and_store(identity, sentences, fill, chunks)
        for _ in chunks:  # whatever is left once the cache failed, or all of it without one
            pass
        return fill.out

    def _encode_and_store(
        self,
        identity: str,
        sentences: Sequence[str],
        fill: _Filler,
        chunks: Iterator[tuple[list[str], np.ndarray, np.ndarray]],
    ) -> None:
        """Encode ``chunks`` under the identity's lock, committing each; a failure of the cache (not of
        the encoder, whose errors pass through) leaves the rest of ``chunks`` to the caller."""
        unserved, encoding = 0, False
        try:
            with self.cache.writer(identity) as writer:
                stored = writer.rows.index
                if any(sentence_key(sentences[i]) in stored for i in np.flatnonzero(~fill.filled).tolist()):
                    writer.read(fill)  # a concurrent run encoded some while we scanned
                while True:
                    encoding = True
                    step = next(chunks, None)
                    encoding = False
                    if step is None:
                        break
                    chunk, vecs, finite = step
                    writer.add_keys([sentence_key(chunk[i]) for i in np.flatnonzero(finite)], vecs[finite])
                    unserved += int((~finite).sum())
        except _CACHE_FAILURES as exc:
            if encoding:
                raise
            self._leave_cache("written", identity, exc)
        if unserved:
            logger.warning(
                "%s: %d sentence(s) encoded to non-finite vectors; returned as they are, not cached",
                self.name,
                unserved,
            )

    def _leave_cache(self, what: str, identity: str, exc: BaseException) -> None:
        self.without_cache = True
        if identity in self.cache.unusable:
            return
        self.cache.unusable.add(identity)
        # the cache's own wrappers name the file; the folder is named here, so say the bare cause
        inner = exc.__cause__ or (exc.__context__ if isinstance(exc, CacheWriteError) else None)
        cause = inner if isinstance(inner, (sqlite3.Error, OSError)) else exc
        logger.warning(
            "%s: the embedding cache cannot be %s (%s: %s); this run goes on without it",
            self.name,
            what,
            self.cache.root / identity,
            cause,
        )

    def _encode_missing(
        self, sentences: Sequence[str], fill: _Filler, role: Role = DEFAULT_ROLE
    ) -> Iterator[tuple[list[str], np.ndarray, np.ndarray]]:
        """Encode, chunk by chunk, the sentences ``fill`` lacks, copying each chunk's vectors in;
        yields each chunk, its vectors and which rows are finite.

        Chunks are cut from one stable longest-first order (by characters, as the HF encoder sorts):
        an inner encoder that sorts each chunk the same way then forms exactly the batches of a
        single call whenever its batch size divides the chunk size (64 and 2048 by default), so
        vectors are bit-identical to encoding all at once. Otherwise (or when an encoder breaks
        length ties differently, as sentence-transformers' unstable sort may) only batches at chunk
        edges change, and with them the padding, which can move vectors in their last float bits.
        """
        missing = sorted(np.flatnonzero(~fill.filled).tolist(), key=lambda i: len(sentences[i]), reverse=True)
        rows = [
            np.asarray(missing[a : a + self.chunk_size], dtype=np.intp) for a in range(0, len(missing), self.chunk_size)
        ]
        chunks = [[sentences[i] for i in r] for r in rows]
        # one bar over the whole pass: the cache's, counting sentences, where there are several chunks
        # (or actors, whose bars are elsewhere); a single chunk keeps the encoder's own finer bar
        own_bar = shown() and (self.encode_chunks is not None or len(chunks) > 1)
        if self.encode_chunks is not None:
            encoded = self.encode_chunks(chunks, role)
        elif own_bar:
            encoded = (self._encode_quietly(chunk, role) for chunk in chunks)
        else:
            encoded = (self.inner.encode_role(chunk, role) for chunk in chunks)
        from tqdm.auto import tqdm

        with tqdm(total=len(missing), desc=f"encode {self.name}", unit="sentence", disable=not own_bar) as bar:
            for at, chunk, vecs in zip(rows, chunks, encoded):
                vecs = np.asarray(vecs, dtype=np.float32)
                if vecs.ndim != 2 or len(vecs) != len(chunk):
                    raise InvalidInputError(f"{self.name}: {len(chunk)} sentences gave an array of shape {vecs.shape}")
                self.encoded += len(chunk)
                if fill.out is None:
                    fill.out = fill.allocate(vecs.shape[1])
                fill.out[at] = vecs
                fill.filled[at] = True
                bar.update(len(chunk))
                yield chunk, vecs, np.isfinite(vecs).all(axis=1)

    def _encode_quietly(self, chunk: list[str], role: Role) -> np.ndarray:
        """The inner encoder's vectors with its own bar off (the cache shows one for the pass)."""
        with progress_shown(False):
            return self.inner.encode_role(chunk, role)

    def identity_info(self) -> dict[str, Any]:
        return self.inner.identity_info()

    def identity_record(self) -> dict[str, Any]:
        return self.inner.identity_record()

    @property
    def metadata(self) -> dict[str, Any]:
        return self.inner.metadata

    def __getattr__(self, item: str) -> Any:
        # reached only for attributes CachingEncoder lacks (e.g. a tokenizer): delegate
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)
